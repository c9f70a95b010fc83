// Sparse mixture-of-experts decoders: Mixtral (block_sparse_moe, w1/w3/w2),
// Qwen2-MoE (a gated shared expert), Qwen3-MoE and OLMoE (q/k norms).
#include "ir/families/decoder.h"
#include "ir/families/families.h"
#include "ir/families/moe_layers.h"

namespace bonfire::ir {

json moe_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.n_experts = c.n_experts;
  s.top_k = c.n_experts_per_tok;
  s.renorm = c.norm_topk_prob;
  s.moe_layer = moe_layers(c);
  if (c.family == "mixtral") {
    s.router = "block_sparse_moe.gate";
    s.expert_gate = "block_sparse_moe.experts.{e}.w1";
    s.expert_up = "block_sparse_moe.experts.{e}.w3";
    s.expert_down = "block_sparse_moe.experts.{e}.w2";
  } else {
    s.router = "mlp.gate";
    s.expert_gate = "mlp.experts.{e}.gate_proj";
    s.expert_up = "mlp.experts.{e}.up_proj";
    s.expert_down = "mlp.experts.{e}.down_proj";
  }
  if (c.expert_quant == "qmoe") {
    // ONNX Runtime GenAI's int4 QMoE layout (docs/QMOE.md): one fc1 tensor
    // (gate and up rows interleaved) and one fc2 tensor per layer, with
    // scales beside them. ORT's QMoE always renormalises over the topK.
    s.experts_qmoe = true;
    s.expert_gate = s.expert_up = "mlp.experts.fc1_experts_weights";
    s.expert_down = "mlp.experts.fc2_experts_weights";
    s.renorm = true;
  }
  if (c.family == "qwen2_moe") {
    s.qkv_bias = true;
    if (c.shared_expert_intermediate_size > 0) {
      s.shared_gate = "mlp.shared_expert.gate_proj";
      s.shared_up = "mlp.shared_expert.up_proj";
      s.shared_down = "mlp.shared_expert.down_proj";
      s.shared_expert_gate = "mlp.shared_expert_gate";
    }
  }
  if (c.qk_norm) {
    s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
    s.qk_norm_per_head = c.family != "olmoe";  // OLMoE normalises the whole projection
  }
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
