// moe_ffn over experts packed in ONNX Runtime's QMoE layout (docs/QMOE.md):
// the node's experts name one fc1 tensor as both gate and up (gate and up
// rows interleaved, [E, 2I, C/pack] u8) and one fc2 tensor as down
// ([E, C, I/pack] u8), without {e}. The scales are found beside them by name:
// "...fc1_experts_weights" → "...fc1_scales" (the names of ORT's QMoE
// inputs), "....qweight" → "....scales" (ONNX Runtime GenAI's initializers).
// Lowered to the v3 op moe with the extension value layout "qmoe" (feature
// ext.moe.qmoe), which runs the QMoE kernel package.
#include <string>

#include "ir/lowerer.h"

namespace bonfire::ir {

namespace {

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

}  // namespace

bool moe_experts_qmoe(const json& experts) {
  const std::string g = experts.value("gate", ""), u = experts.value("up", "");
  return !g.empty() && g == u && g.find("{e}") == std::string::npos;
}

std::string qmoe_scales_name(const std::string& weights) {
  if (ends_with(weights, "_experts_weights"))
    return weights.substr(0, weights.size() - std::string("_experts_weights").size()) + "_scales";
  if (ends_with(weights, ".qweight")) return weights.substr(0, weights.size() - std::string(".qweight").size()) + ".scales";
  return "";
}

Value lower_moe_qmoe(Lowerer& L) {
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

}  // namespace bonfire::ir
