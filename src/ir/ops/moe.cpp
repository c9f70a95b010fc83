// moe_ffn: a router picks top_k of n_experts SwiGLU experts per token
// (softmax or sigmoid scoring, expert groups, selection bias), with the
// experts as one tensor each or packed in ONNX Runtime's QMoE layout
// (docs/IR.md §8; rule R13).
//
// Experts packed in ONNX Runtime's QMoE layout (docs/QMOE.md):
// the node's experts name one fc1 tensor as both gate and up (gate and up
// rows interleaved, [E, 2I, C/pack] u8) and one fc2 tensor as down
// ([E, C, I/pack] u8), without {e}. The scales are found beside them by name:
// "...fc1_experts_weights" → "...fc1_scales" (the names of ORT's QMoE
// inputs), "....qweight" → "....scales" (ONNX Runtime GenAI's initializers).
// Lowered to the v3 op moe with the extension value layout "qmoe" (feature
// ext.moe.qmoe), which runs the QMoE kernel package.
#include <string>

#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Checker;
using detail::Flow;

using detail::str;

namespace {

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

bool moe_experts_qmoe(const json& experts) {
  const std::string g = experts.value("gate", ""), u = experts.value("up", "");
  return !g.empty() && g == u && g.find("{e}") == std::string::npos;
}

// ---- R13 --------------------------------------------------------------------

void check_moe(Checker& c, const std::string& sec, size_t k, const json& node) {
  using namespace detail;
  const std::string path = node_path(sec, k);
  for (int64_t l : node_layers(c, sec, node)) {
    const auto n = int_field(node, "n_experts", l), top_k = int_field(node, "top_k", l);
    if (n && top_k && *top_k > *n)
      c.report(path + ".top_k", "top_k " + str(*top_k) + " is more than n_experts " + str(*n) + on_layer(node, l), 13,
               path + "|topk");
    if (!node.contains("groups")) continue;
    const auto gn = int_field(node["groups"], "n", -1), gt = int_field(node["groups"], "top", -1);
    if (gn && n && *gn > 0 && *n % *gn != 0)
      c.report(path + ".groups.n", "groups.n " + str(*gn) + " does not divide n_experts " + str(*n) + on_layer(node, l), 13,
               path + "|gn");
    if (gn && gt && *gt > *gn)
      c.report(path + ".groups.top", "groups.top " + str(*gt) + " is more than groups.n " + str(*gn), 13, path + "|gt");
    if (gn && gt && n && top_k && *gn > 0 && *n % *gn == 0 && mul(*gt, *n / *gn) >= 0 && *top_k > mul(*gt, *n / *gn))
      c.report(path + ".top_k",
               "top_k " + str(*top_k) + " is more than the experts of the eligible groups, groups.top * n_experts / groups.n = " +
                   str(*gt) + " * " + str(*n) + " / " + str(*gn) + " = " + str(mul(*gt, *n / *gn)) + on_layer(node, l),
               13, path + "|gk");
  }
}

// ---- widths and weights -------------------------------------------------------

void moe_widths(Flow& f) {
  const json& n = f.node();
  const int v = f.x(0);
  const auto ne = f.i("n_experts");
  if (const Tensor* t = f.field_tensor("router")) {
    const std::string nm = f.tname(n["router"]);
    if (t->shape.size() != 2 || (ne && t->shape[0] != *ne))
      f.bad_shape(".router", nm, *t, "the router must be [n_experts" + (ne ? " = " + str(*ne) : std::string()) + ", width]");
    else
      f.need(v, t->shape[1], f.name(0), "columns of " + f.desc(nm, *t), ".router", 18);
  }
  if (const Tensor* t = f.field_tensor("selection_bias"))
    if (ne && t->numel() != *ne)
      f.bad_shape(".selection_bias", f.tname(n["selection_bias"]), *t, "selection_bias has n_experts = " + str(*ne) + " values");
  const json& ex = n["experts"];
  // Experts packed in ONNX Runtime's QMoE layout: the moe op and the QMoE
  // package check their shapes; here only the expert count.
  const bool qmoe = moe_experts_qmoe(ex);
  const std::string g0 = ex.value("gate", "");
  if (qmoe && f.has_weights() && ne)
    if (const Tensor* t = f.tensor(g0, ".experts.gate", -1); t && (t->shape.size() != 3 || t->shape[0] != *ne))
      f.bad_shape(".experts.gate", f.tname(g0, -1), *t, "QMoE fc1 weights are [n_experts = " + str(*ne) + ", 2I, width/pack]");
  // Past the store's size every expert is missing: stop there.
  const int64_t experts = !qmoe && f.has_weights() && ne ? std::min<int64_t>(*ne, (int64_t)f.weight_count() + 1) : 0;
  for (int64_t e = 0; e < experts; ++e) {
    const std::string g = ex["gate"].get<std::string>(), u = ex["up"].get<std::string>(), d = ex["down"].get<std::string>();
    const Tensor* tg = f.tensor(g, ".experts.gate", e);
    const Tensor* tu = f.tensor(u, ".experts.up", e);
    const Tensor* td = f.tensor(d, ".experts.down", e);
    int64_t inter = -1;
    if (tg) {
      if (tg->shape.size() != 2) {
        f.bad_shape(".experts.gate", f.tname(g, e), *tg, "expert gate weights are [I, width]");
      } else {
        inter = tg->shape[0];
        f.need(v, tg->shape[1], f.name(0), "columns of " + f.desc(f.tname(g, e), *tg), ".experts.gate", 18);
      }
    }
    const std::string with_i = inter >= 0 ? " with I = " + str(inter) + " as gate" : std::string();
    if (tu) {
      if (tu->shape.size() != 2 || (inter >= 0 && tu->shape[0] != inter))
        f.bad_shape(".experts.up", f.tname(u, e), *tu, "expert up weights are [I, width]" + with_i);
      else
        f.need(v, tu->shape[1], f.name(0), "columns of " + f.desc(f.tname(u, e), *tu), ".experts.up", 18);
    }
    if (td) {
      if (td->shape.size() != 2 || (inter >= 0 && td->shape[1] != inter))
        f.bad_shape(".experts.down", f.tname(d, e), *td, "expert down weights are [width, I]" + with_i);
      else
        f.need(v, td->shape[0], f.name(0), "rows of " + f.desc(f.tname(d, e), *td), ".experts.down", 18);
    }
  }
  f.same_width(v);
}

// ---- lowering -----------------------------------------------------------------

std::string qmoe_scales_name(const std::string& weights) {
  if (ends_with(weights, "_experts_weights"))
    return weights.substr(0, weights.size() - std::string("_experts_weights").size()) + "_scales";
  if (ends_with(weights, ".qweight")) return weights.substr(0, weights.size() - std::string(".qweight").size()) + ".scales";
  return "";
}

Value qmoe_value(Lowerer& L) {
  const Value x = L.input(0);
  const json& ex = L.field("experts");
  const std::string fc1 = ex["gate"].get<std::string>(), fc2 = ex["down"].get<std::string>();
  const std::string s1 = qmoe_scales_name(fc1), s2 = qmoe_scales_name(fc2);
  if (s1.empty() || s2.empty())
    L.fail("moe_ffn experts in the QMoE layout (gate = up, no {e}) must be named \"..._experts_weights\" or "
           "\"....qweight\" so their scales can be found; got \"" + fc1 + "\", \"" + fc2 + "\"");
  if (L.str_field("gate_norm", "raw") != "renorm")
    L.fail("moe_ffn in the QMoE layout routes as ONNX Runtime does (softmax over the top_k selected): gate_norm "
           "must be \"renorm\"");
  if (L.str_field("scoring", "softmax") != "softmax") L.fail("moe_ffn in the QMoE layout needs scoring \"softmax\"");
  if (L.str_field("activation", "silu") != "silu") L.fail("moe_ffn activation must be \"silu\"");
  if (L.has("selection_bias") || L.has("groups"))
    L.fail("moe_ffn in the QMoE layout has no selection_bias or groups");
  const std::string logits = L.emit("matmul", {x.ref, L.weight(L.field("router").get<std::string>())},
                                    {{"transB", true}}, "router");
  json p = {{"topK", L.int_field("top_k", 1)}, {"normalize", true}, {"layout", "qmoe"}};
  return {L.emit("moe", {x.ref, logits, L.weight(fc1), L.weight(s1), L.weight(fc2), L.weight(s2)}, p), x.width};
}

Value moe_value(Lowerer& L) {
  if (moe_experts_qmoe(L.field("experts"))) return qmoe_value(L);
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
    const json& g = L.field("groups");
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

std::vector<Value> lower_moe(Lowerer& L) { return {moe_value(L)}; }

}  // namespace

void register_ir_moe_ops(std::vector<IrOpDef>& ops) {
  IrOpDef d = ir_op("moe_ffn", 1, moe_widths, lower_moe);
  d.check = check_moe;
  ops.push_back(d);
}

}  // namespace bonfire::ir
