// Attention with its KV cache in the session (grouped heads, windows,
// soft caps, ALiBi, cross-layer sharing) and DeepSeek's multi-head latent
// attention over a latent cache (docs/IR.md §7; rules R9, R14, R16).
#include <cmath>

#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Checker;
using detail::Flow;

using detail::str;

namespace {

// ---- rules ------------------------------------------------------------------

// The node's kv slot, or nullptr (a missing or non-kv slot is R8's problem).
const json* kv_slot(const Checker& c, const json& node) {
  const json* slot = node.contains("state") ? detail::find_slot(c.doc, node["state"].get<std::string>()) : nullptr;
  return slot && (*slot)["kind"] == "kv" ? slot : nullptr;
}

// R9 (heads against kv_heads and the slot), R16 (softmax).
void check_attention(Checker& c, const std::string& sec, size_t k, const json& node) {
  using namespace detail;
  const std::string path = node_path(sec, k);
  const json* slot = kv_slot(c, node);
  for (int64_t l : node_layers(c, sec, node)) {
    check_kv_heads_divide(c, path, node, l);
    if (slot && sec == "block") {
      const char* keys[] = {"heads", "kv_heads", "head_dim"};
      for (const char* key : keys) {
        const auto a = int_field(node, key, l), b = int_field(*slot, key, l);
        if (a && b && *a != *b)
          c.report(path + "." + key,
                   std::string(key) + " is " + str(*a) + (on_layer(node, l).empty() ? on_layer(*slot, l) : on_layer(node, l)) +
                       " but its slot " + (*slot)["name"].dump() + " has " + str(*b),
                   9, path + "|" + key);
      }
    }
    const auto softmax = str_field(node, "softmax", l);
    if (softmax && *softmax != "standard" && *softmax != "alibi")
      c.report(path + ".softmax", "softmax is " + quoted(*softmax) + ", expected \"standard\" or \"alibi\"", 16);
  }
}

// R14: rotary pairs, and a slot as wide as the latent cache.
void check_mla(Checker& c, const std::string& sec, size_t k, const json& node) {
  using namespace detail;
  const std::string path = node_path(sec, k);
  const json* slot = kv_slot(c, node);
  for (int64_t l : node_layers(c, sec, node)) {
    const auto rope = int_field(node, "qk_rope", l), rank = int_field(node, "kv_rank", l);
    if (rope && *rope % 2 != 0)
      c.report(path + ".qk_rope", "qk_rope " + str(*rope) + on_layer(node, l) + " is odd; rotary pairs need it even", 14,
               path + "|odd");
    if (slot && rope && rank) {
      const auto kv = int_field(*slot, "kv_heads", l), hd = int_field(*slot, "head_dim", l);
      if (kv && hd && mul(*kv, *hd) >= 0 && add(*rank, *rope) >= 0 && mul(*kv, *hd) != add(*rank, *rope))
        c.report(path + ".state",
                 "slot " + (*slot)["name"].dump() + " is kv_heads*head_dim = " + str(*kv) + "*" + str(*hd) + " = " +
                     str(mul(*kv, *hd)) + " wide" + on_layer(node, l) + " but the latent cache needs kv_rank + qk_rope = " +
                     str(*rank) + " + " + str(*rope) + " = " + str(add(*rank, *rope)),
                 14, path + "|slot");
    }
  }
}

// ---- widths and weights -------------------------------------------------------

void attention_widths(Flow& f) {
  const json& n = f.node();
  const auto h = f.i("heads"), kv = f.i("kv_heads"), hd = f.i("head_dim");
  if (h && hd) f.need(f.x(0), detail::mul(*h, *hd), f.name(0), "q: heads*head_dim = " + str(*h) + "*" + str(*hd), ".in[0]");
  for (size_t j = 1; j < 3 && j < f.inputs(); ++j)
    if (kv && hd)
      f.need(f.x(j), detail::mul(*kv, *hd), f.name(j),
             std::string(j == 1 ? "k" : "v") + ": kv_heads*head_dim = " + str(*kv) + "*" + str(*hd), ".in[" + str(j) + "]");
  f.fixed(h && hd ? detail::mul(*h, *hd) : -1, "attention output heads*head_dim");
  if (n.contains("position_bias")) f.tensor(n["position_bias"]["weight"].get<std::string>(), ".position_bias.weight");
  if (n.contains("relative_kv")) {
    f.tensor(n["relative_kv"]["key"].get<std::string>(), ".relative_kv.key");
    if (n["relative_kv"].contains("value") && n["relative_kv"]["value"].is_string())
      f.tensor(n["relative_kv"]["value"].get<std::string>(), ".relative_kv.value");
  }
}

void mla_widths(Flow& f) {
  using detail::add;
  using detail::mul;
  const json& n = f.node();
  const auto h = f.i("heads"), rank = f.i("kv_rank"), nope = f.i("qk_nope"), rope = f.i("qk_rope"), vd = f.i("v_head_dim");
  const size_t c = f.inputs() == 4 ? 2 : 1;  // [q, c, k_pe] or [q_nope, q_pe, c, k_pe]
  if (c == 1 && h && nope && rope)
    f.need(f.x(0), mul(*h, add(*nope, *rope)), f.name(0),
           "q: heads*(qk_nope+qk_rope) = " + str(*h) + "*(" + str(*nope) + "+" + str(*rope) + ")", ".in[0]");
  if (c == 2 && h && nope) f.need(f.x(0), mul(*h, *nope), f.name(0), "q_nope: heads*qk_nope = " + str(*h) + "*" + str(*nope), ".in[0]");
  if (c == 2 && h && rope) f.need(f.x(1), mul(*h, *rope), f.name(1), "q_pe: heads*qk_rope = " + str(*h) + "*" + str(*rope), ".in[1]");
  if (rank && f.inputs() > c) f.need(f.x(c), *rank, f.name(c), "c: kv_rank", ".in[" + str(c) + "]");
  if (rope && f.inputs() > c + 1) f.need(f.x(c + 1), *rope, f.name(c + 1), "k_pe: qk_rope", ".in[" + str(c + 1) + "]");
  if (h && nope && vd && rank && mul(*h, add(*nope, *vd)) >= 0) {
    const std::string kb = n["k_b"].get<std::string>(), vb = n["v_b"].get<std::string>();
    if (kb == vb) {
      if (const Tensor* t = f.field_tensor("k_b"))
        if (t->shape != Shape{mul(*h, add(*nope, *vd)), *rank})
          f.bad_shape(".k_b", f.tname(kb), *t,
                      "k_b = v_b must be [heads*(qk_nope+v_head_dim), kv_rank] = " + shape_str({mul(*h, add(*nope, *vd)), *rank}));
    } else {
      if (const Tensor* t = f.field_tensor("k_b"))
        if (t->shape != Shape{mul(*h, *nope), *rank})
          f.bad_shape(".k_b", f.tname(kb), *t, "k_b must be [heads*qk_nope, kv_rank] = " + shape_str({mul(*h, *nope), *rank}));
      if (const Tensor* t = f.field_tensor("v_b"))
        if (t->shape != Shape{mul(*h, *vd), *rank})
          f.bad_shape(".v_b", f.tname(vb), *t, "v_b must be [heads*v_head_dim, kv_rank] = " + shape_str({mul(*h, *vd), *rank}));
    }
  }
  f.fixed(h && vd ? mul(*h, *vd) : -1, "mla_attention output heads*v_head_dim");
}

// ---- lowering -----------------------------------------------------------------

// A sliding-window layer keeps its cache as a ring of `window` rows
// (ops/ring_attention.cpp) when the window is shorter than the session's
// context; 0 otherwise (no window, or one as long as the context: full
// attention, a full cache).
int64_t ring_rows(Lowerer& L, const json& slot, int64_t layer) {
  const json& w = slot.contains("window") ? at_layer(slot["window"], layer) : json();
  const int64_t window = w.is_number_integer() ? w.get<int64_t>() : 0;
  return window > 0 && window < L.options().ctx ? window : 0;
}

// Writes k and v (or the MLA latent) into the slot's caches; returns the
// cache references to attend over.
std::pair<std::string, std::string> write_kv(Lowerer& L, const json& slot, const std::string& k,
                                             const std::string& v, int64_t k_width, int64_t v_width) {
  const std::string name = slot["name"].get<std::string>();
  const json from = slot.contains("kv_from") ? at_layer(slot["kv_from"], L.layer()) : json();
  if (from.is_number_integer()) {
    // Cross-layer sharing: read the caches an earlier layer wrote.
    const int64_t src = from.get<int64_t>();
    if (src < 0 || src >= L.layer()) L.fail("kv_from must name an earlier layer (rule R12)");
    if (!L.skipping() && src < L.options().first_layer)
      L.fail("kv_from reads layer " + std::to_string(src) + ", which is before this stage (first_layer " +
             std::to_string(L.options().first_layer) + "): the model cannot be split there");
    if (ring_rows(L, slot, src) > 0)
      L.fail("kv_from reads layer " + std::to_string(src) + ", whose cache is a ring of its sliding window: sharing a "
             "ring between layers is not implemented by this lowering");
    return {L.state_of_layer(src, name, "k"), v.empty() ? "" : L.state_of_layer(src, name, "v")};
  }
  if (slot.contains("evict") || slot.contains("kv_rows"))
    L.fail("kv slot \"" + name + "\": evict and kv_rows are not implemented by this lowering");
  const int64_t rows = L.cache_rows(slot);
  const std::string kc = L.state(name, "k", {rows, k_width});
  const std::string kw = L.emit("cache_write", {kc, k}, {{"offset", "pos"}}, name + ".k");
  L.state_written(name, "k", kw);
  std::string vw;
  if (!v.empty()) {
    const std::string vc = L.state(name, "v", {rows, v_width});
    vw = L.emit("cache_write", {vc, v}, {{"offset", "pos"}}, name + ".v");
    L.state_written(name, "v", vw);
  }
  return {kw, vw};
}

json attention_params(Lowerer& L, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  json p = {{"heads", heads}, {"headDim", head_dim}, {"posOffset", "pos"}};
  if (kv_heads != heads) p["kvHeads"] = kv_heads;
  const json& causal = L.field("causal");
  if (causal.is_boolean() && !causal.get<bool>()) p["causal"] = false;
  const double scale = L.num_field("scale", 1 / std::sqrt(double(head_dim)));
  if (std::fabs(scale * std::sqrt(double(head_dim)) - 1) > 1e-9) p["scale"] = scale;
  if (const double cap = L.num_field("softcap", 0); cap > 0) p["softcap"] = cap;
  if (const int64_t w = L.int_field("window", 0); w > 0) p["window"] = w;
  if (L.int_field("sinks", 0) > 0) L.fail("attention sinks are not implemented by this lowering");
  const std::string softmax = L.str_field("softmax", "standard");
  if (softmax == "alibi")
    p["alibi"] = true;
  else if (softmax != "standard")
    L.fail("attention softmax \"" + softmax + "\" is neither \"standard\" nor \"alibi\" (rule R16)");
  if (L.str_field("mask", "causal") != "causal") L.fail("attention mask \"turn_state\" is not implemented by this lowering");
  if (L.has("position_bias") || L.has("relative_kv"))
    L.fail("position_bias and relative_kv are not implemented by this lowering");
  return p;
}

// Non-causal attention must not see the cache rows past the step.
std::string visible_rows(Lowerer& L, const json& p, const std::string& cache) {
  if (p.value("causal", true)) return cache;
  return L.emit("slice", {cache}, {{"start", 0}, {"length", L.expr_plus_tokens("pos")}}, "visible");
}

Value attention_value(Lowerer& L) {
  const json& slot = L.slot(L.field("state").get<std::string>());
  const int64_t heads = L.int_field("heads", 1), kv_heads = L.int_field("kv_heads", heads);
  const int64_t head_dim = L.int_field("head_dim", 1);
  const Value q = L.input(0), k = L.input(1), v = L.input(2);
  const json p = attention_params(L, heads, kv_heads, head_dim);
  const bool shared = slot.contains("kv_from") && at_layer(slot["kv_from"], L.layer()).is_number_integer();
  if (const int64_t ring = ring_rows(L, slot, L.layer()); ring > 0 && !shared) {
    const int64_t window = p.value("window", int64_t(0));
    if (window <= 0 || window > ring + 1)
      L.fail("attention window " + std::to_string(window) + " on layer " + std::to_string(L.layer()) +
             " does not fit its slot's ring of " + std::to_string(ring) + " rows (the slot's window)");
    if (!p.value("causal", true)) L.fail("a sliding-window cache (a ring) serves causal attention only");
    const std::string name = slot["name"].get<std::string>();
    const std::string kr = L.state(name, "k", {ring, kv_heads * head_dim});
    const std::string vr = L.state(name, "v", {ring, kv_heads * head_dim});
    return {L.emit("ring_attention", {q.ref, kr, vr, k.ref, v.ref}, p, "attention"), heads * head_dim};
  }
  auto [kc, vc] = write_kv(L, slot, k.ref, v.ref, kv_heads * head_dim, kv_heads * head_dim);
  return {L.emit("attention", {q.ref, visible_rows(L, p, kc), visible_rows(L, p, vc)}, p), heads * head_dim};
}

// Absorbed MLA, as DeepSeek's inference code and llama.cpp run it: the
// cache holds [c | k_pe] per position (the latent), and nothing is rebuilt
// from it per step. Per head h, with k_b_h [qk_nope, kv_rank] and
// v_b_h [v_head_dim, kv_rank] (rows of k_b / v_b), the nope part of a score
// is q_nope_h · (c · k_b_hᵀ)ᵀ = (q_nope_h · k_b_h) · cᵀ, so the query becomes [q_nope_h · k_b_h | q_pe_h] (kv_rank + qk_rope wide)
// against the latent rows as keys, one kv head shared by all query heads;
// the values are the latent rows too, and each head's [kv_rank] output is
// taken through v_b_h at the end. A step costs O(pos · heads · (kv_rank +
// qk_rope)) in attention, as plain attention does, instead of expanding
// every cached position into per-head keys and values.
Value mla_value(Lowerer& L) {
  const json& slot = L.slot(L.field("state").get<std::string>());
  const int64_t H = L.int_field("heads", 1), R = L.int_field("kv_rank", 1);
  const int64_t N = L.int_field("qk_nope", 1), P = L.int_field("qk_rope", 1), V = L.int_field("v_head_dim", 1);
  // in: [q, c, k_pe] with q's heads [nope | rope], or [q_nope, q_pe, c, k_pe].
  const bool split_q = L.input_count() == 4;
  const Value q = L.input(0), c = L.input(split_q ? 2 : 1), pe = L.input(split_q ? 3 : 2);
  const std::string kb = L.field("k_b").get<std::string>(), vb = L.field("v_b").get<std::string>();
  const bool fused = kb == vb;  // DeepSeek's kv_b_proj: per head, qk_nope rows of k then v_head_dim rows of v
  const std::string kb_w = L.weight(kb), vb_w = L.weight(vb);
  auto rows_of = [&](const std::string& w, int64_t start, int64_t length, const std::string& hint) {
    return L.emit("slice", {w}, {{"start", start}, {"length", length}}, hint);
  };
  const int64_t q_stride = split_q ? N : N + P;
  // [T, H*R]: every head's nope part taken into the latent space.
  std::string q_lat;
  for (int64_t h = 0; h < H; ++h) {
    const std::string qn = L.emit("slice", {q.ref}, {{"start", h * q_stride}, {"length", N}, {"axis", -1}}, "q_nope");
    const std::string kb_h = rows_of(kb_w, fused ? h * (N + V) : h * N, N, "k_b");
    const std::string ql = L.emit("matmul", {qn, kb_h}, json::object(), "q_latent");
    q_lat = q_lat.empty() ? ql : L.emit("concat", {q_lat, ql}, {{"axis", -1}}, "q_latent");
  }
  std::string q_pe;
  if (split_q) {
    q_pe = L.input(1).ref;
  } else {
    const std::string heads = L.emit("reshape", {q.ref}, {{"shape", {-1, N + P}}});
    q_pe = L.emit("slice", {heads}, {{"start", N}, {"length", P}, {"axis", -1}}, "q_pe");
  }
  const std::string q_rows = L.emit("concat", {L.emit("reshape", {q_lat}, {{"shape", {-1, R}}}),
                                               L.emit("reshape", {q_pe}, {{"shape", {-1, P}}})},
                                    {{"axis", -1}}, "q");
  const std::string q_abs = L.emit("reshape", {q_rows}, {{"shape", {-1, H * (R + P)}}}, "q");

  json p = attention_params(L, H, 1, R + P);
  p["scale"] = L.num_field("scale", 1 / std::sqrt(double(N + P)));  // the head's own dim, not the latent's
  p["vHeadDim"] = R + P;
  const std::string latent = L.emit("concat", {c.ref, pe.ref}, {{"axis", -1}}, "latent");
  const std::string cache = write_kv(L, slot, latent, "", R + P, 0).first;
  const std::string rows = visible_rows(L, p, cache);
  // [T, H*(R+P)]: each head's weighted sum of latent rows; its first R values are the latent part.
  const std::string o = L.emit("attention", {q_abs, rows, rows}, p);
  const std::string o_heads = L.emit("reshape", {o}, {{"shape", {-1, R + P}}});
  const std::string o_lat = L.emit("reshape", {L.emit("slice", {o_heads}, {{"start", 0}, {"length", R}, {"axis", -1}})},
                                   {{"shape", {-1, H * R}}}, "o_latent");
  std::string out;
  for (int64_t h = 0; h < H; ++h) {
    const std::string oh = L.emit("slice", {o_lat}, {{"start", h * R}, {"length", R}, {"axis", -1}}, "o_latent");
    const std::string vb_h = rows_of(vb_w, fused ? h * (N + V) + N : h * V, V, "v_b");
    const std::string vh = L.emit("matmul", {oh, vb_h}, {{"transB", true}}, "v");
    out = out.empty() ? vh : L.emit("concat", {out, vh}, {{"axis", -1}}, "mla_out");
  }
  return {out, H * V};
}

std::vector<Value> lower_attention(Lowerer& L) { return {attention_value(L)}; }
std::vector<Value> lower_mla(Lowerer& L) { return {mla_value(L)}; }

}  // namespace

void register_ir_attention_ops(std::vector<IrOpDef>& ops) {
  IrOpDef a = ir_op("attention", 3, attention_widths, lower_attention);
  a.state = SlotKind::Kv;
  a.check = check_attention;
  ops.push_back(a);
  // [q, c, k_pe], or [q_nope, q_pe, c, k_pe] with q joined head by head.
  IrOpDef m = ir_op("mla_attention", 3, mla_widths, lower_mla);
  m.max_inputs = 4;
  m.inputs_text = "3 (q, c, k_pe) or 4 (q_nope, q_pe, c, k_pe)";
  m.state = SlotKind::Kv;
  m.check = check_mla;
  ops.push_back(m);
}

}  // namespace bonfire::ir
