// Lowering of rope, attention (KV caches in the session), DeepSeek's
// multi-head latent attention, mixture of experts and the causal conv
// (docs/IR.md §6–§8, §11).
#include <cmath>

#include "ir/lowerer.h"

namespace bonfire::ir {

namespace {

std::vector<float> tensor_values(Lowerer& L, const std::string& tmpl) {
  const Tensor* t = L.weight_tensor(tmpl);
  if (!t && L.skipping()) return {};  // the rotation is dropped with the rest of an earlier stage
  if (!t) L.fail("freq_factors \"" + tmpl + "\" is a checkpoint tensor; lower with the model's weights");
  const Tensor f = to_f32(*t);
  return std::vector<float>(f.f32(), f.f32() + f.numel());
}

// The rope node's per-dimension frequency factors, or empty for none.
std::vector<float> freq_factors(Lowerer& L) {
  const json& f = L.field("freq_factors");
  if (f.is_null()) return {};
  if (f.is_array()) return f.get<std::vector<float>>();
  if (f.is_string()) return tensor_values(L, f.get<std::string>());
  const int64_t original = f.value("original_ctx", int64_t(0));
  return tensor_values(L, f[L.options().ctx > original ? "long" : "short"].get<std::string>());
}

}  // namespace

Value lower_rope_one(Lowerer& L, const Value& x, int64_t heads) {
  const int64_t head_dim = L.int_field("head_dim", 0);
  const double theta = L.num_field("theta", 10000);
  const int64_t n_rot = L.int_field("n_rot", head_dim);
  json p = {{"headDim", head_dim}, {"base", theta}, {"offset", "pos"}};
  if (n_rot != head_dim) p["rotaryDim"] = n_rot;
  if (L.str_field("pairing", "neox") == "interleaved") p["interleaved"] = true;
  const double freq_scale = L.num_field("freq_scale", 1);
  const std::vector<float> factors = freq_factors(L);
  if (freq_scale != 1 || !factors.empty()) {
    if (!factors.empty() && (int64_t)factors.size() != n_rot / 2)
      L.fail("freq_factors has " + std::to_string(factors.size()) + " entries, rope needs n_rot/2 = " +
             std::to_string(n_rot / 2) + " (rule R11)");
    std::vector<double> inv(n_rot / 2);
    for (int64_t j = 0; j < n_rot / 2; ++j)
      inv[j] = std::pow(theta, -2.0 * j / n_rot) * freq_scale / (factors.empty() ? 1.0 : factors[j]);
    p["invFreq"] = inv;
  }
  if (const double a = L.num_field("attn_factor", 1); a != 1) p["attentionFactor"] = a;
  return {L.emit("rope", {x.ref}, p), x.width >= 0 ? x.width : heads * head_dim};
}

namespace {

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

}  // namespace

Value lower_attention(Lowerer& L) {
  const json& slot = L.slot(L.field("state").get<std::string>());
  const int64_t heads = L.int_field("heads", 1), kv_heads = L.int_field("kv_heads", heads);
  const int64_t head_dim = L.int_field("head_dim", 1);
  const Value q = L.input(0), k = L.input(1), v = L.input(2);
  const json p = attention_params(L, heads, kv_heads, head_dim);
  auto [kc, vc] = write_kv(L, slot, k.ref, v.ref, kv_heads * head_dim, kv_heads * head_dim);
  return {L.emit("attention", {q.ref, visible_rows(L, p, kc), visible_rows(L, p, vc)}, p), heads * head_dim};
}

Value lower_mla_attention(Lowerer& L) {
  const json& slot = L.slot(L.field("state").get<std::string>());
  const int64_t H = L.int_field("heads", 1), R = L.int_field("kv_rank", 1);
  const int64_t N = L.int_field("qk_nope", 1), P = L.int_field("qk_rope", 1), V = L.int_field("v_head_dim", 1);
  // in: [q, c, k_pe] with q's heads already [nope | rope], or
  // [q_nope, q_pe, c, k_pe], joined here head by head.
  const bool split_q = L.input_count() == 4;
  const Value c = L.input(split_q ? 2 : 1), pe = L.input(split_q ? 3 : 2);
  Value q = L.input(0);
  if (split_q) {
    const std::string qn = L.emit("reshape", {q.ref}, {{"shape", {-1, N}}});
    const std::string qp = L.emit("reshape", {L.input(1).ref}, {{"shape", {-1, P}}});
    const std::string qj = L.emit("concat", {qn, qp}, {{"axis", -1}}, "q");
    q = {L.emit("reshape", {qj}, {{"shape", {-1, H * (N + P)}}}, "q"), H * (N + P)};
  }
  json p = attention_params(L, H, H, N + P);
  p["vHeadDim"] = V;
  // The cache holds [c | k_pe] per position: the latent, not per-head keys.
  const std::string latent = L.emit("concat", {c.ref, pe.ref}, {{"axis", -1}}, "latent");
  const std::string cache = write_kv(L, slot, latent, "", R + P, 0).first;
  const std::string rows = L.emit("slice", {cache}, {{"start", 0}, {"length", L.expr_plus_tokens("pos")}}, "rows");
  const std::string cS = L.emit("slice", {rows}, {{"start", 0}, {"length", R}, {"axis", -1}}, "c");
  const std::string peS = L.emit("slice", {rows}, {{"start", R}, {"length", P}, {"axis", -1}}, "k_pe");
  const std::string kb = L.field("k_b").get<std::string>(), vb = L.field("v_b").get<std::string>();
  std::string k_nope, v;  // [S*H, N], [S, H*V]
  if (kb == vb) {
    const std::string kv = L.emit("matmul", {cS, L.weight(kb)}, {{"transB", true}}, "kv");
    const std::string per_head = L.emit("reshape", {kv}, {{"shape", {-1, N + V}}});
    k_nope = L.emit("slice", {per_head}, {{"start", 0}, {"length", N}, {"axis", -1}}, "k_nope");
    const std::string vh = L.emit("slice", {per_head}, {{"start", N}, {"length", V}, {"axis", -1}}, "v");
    v = L.emit("reshape", {vh}, {{"shape", {-1, H * V}}}, "v");
  } else {
    const std::string kn = L.emit("matmul", {cS, L.weight(kb)}, {{"transB", true}}, "k_nope");
    k_nope = L.emit("reshape", {kn}, {{"shape", {-1, N}}});
    v = L.emit("matmul", {cS, L.weight(vb)}, {{"transB", true}}, "v");
  }
  // The shared rotary key part, repeated for every head by a block identity.
  std::vector<float> tile(P * H * P, 0.f);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < P; ++i) tile[i * H * P + h * P + i] = 1.f;
  const std::string rep = L.emit("matmul", {peS, L.constant("mla_tile", tile, {P, H * P})}, json::object(), "k_pe_heads");
  const std::string rep_rows = L.emit("reshape", {rep}, {{"shape", {-1, P}}});
  const std::string k_rows = L.emit("concat", {k_nope, rep_rows}, {{"axis", -1}}, "k");
  const std::string k = L.emit("reshape", {k_rows}, {{"shape", {-1, H * (N + P)}}}, "k");
  return {L.emit("attention", {q.ref, k, v}, p), H * V};
}

// Experts packed in ONNX Runtime's QMoE layout: ir/lower_qmoe.cpp.
bool moe_experts_qmoe(const json& experts);
Value lower_moe_qmoe(Lowerer& L);

Value lower_moe(Lowerer& L) {
  if (moe_experts_qmoe(L.field("experts"))) return lower_moe_qmoe(L);
  const Value x = L.input(0);
  const int64_t E = L.int_field("n_experts", 1);
  const std::string logits = L.emit("matmul", {x.ref, L.weight(L.field("router").get<std::string>())},
                                    {{"transB", true}}, "router");
  json p = {{"topK", L.int_field("top_k", 1)}};
  if (L.str_field("scoring", "softmax") == "sigmoid") p["scoring"] = "sigmoid";
  if (L.str_field("gate_norm", "raw") == "renorm") p["normalize"] = true;
  if (L.str_field("activation", "silu") != "silu") L.fail("moe_ffn activation must be \"silu\"");
  std::vector<std::string> in = {x.ref, logits};
  if (L.has("selection_bias")) {
    in.push_back(L.weight(L.field("selection_bias").get<std::string>()));
    p["selectionBias"] = true;
  }
  if (L.has("groups")) {
    const json& g = (*&L.field("groups"));
    if (g["n"].get<int64_t>() > 1) {
      p["nGroup"] = g["n"];
      p["topKGroup"] = g["top"];
      p["groupTopK"] = 2;
    }
  }
  const json& ex = L.field("experts");
  for (int64_t e = 0; e < E; ++e) {
    in.push_back(L.weight(ex["gate"].get<std::string>(), e));
    in.push_back(L.weight(ex["up"].get<std::string>(), e));
    in.push_back(L.weight(ex["down"].get<std::string>(), e));
  }
  return {L.emit("moe", in, p), x.width};
}

Value lower_conv1d_causal(Lowerer& L) {
  const Value x = L.input(0);
  const int64_t C = L.int_field("channels", 1), K = L.int_field("kernel", 1);
  const json& slot = L.slot(L.field("state").get<std::string>());
  const std::string tensor = slot["tensors"][0]["name"].get<std::string>();
  const std::string state = L.state(slot["name"].get<std::string>(), tensor, {K - 1, C});
  std::string y = L.emit("conv1d", {x.ref, L.weight(L.field("weight").get<std::string>()), state});
  if (L.has("bias")) y = L.emit("add", {y, L.weight(L.field("bias").get<std::string>())});
  // The state keeps the last K-1 rows of [state; x].
  const std::string all = L.emit("concat", {state, x.ref}, {{"axis", 0}}, "conv_rows");
  const std::string last = L.emit("slice", {all}, {{"start", L.tokens()}, {"length", K - 1}}, "conv_rows");
  L.state_written(slot["name"].get<std::string>(), tensor,
                  L.emit("cache_write", {state, last}, {{"offset", 0}}, "conv_state"));
  return {y, C};
}

}  // namespace bonfire::ir
