// DeepSeek-V3: multi-head latent attention (low-rank q, a cached kv latent
// with a shared rotary key part), dense leading layers, then sigmoid-scored
// group-limited experts with a selection bias, shared experts and a routed
// scaling factor. YaRN's attention scale multiplies the softmax scale.
#include <cmath>

#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json deepseek_v3_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.mla = true;
  s.q_lora_rank = c.q_lora_rank;
  s.kv_lora_rank = c.kv_lora_rank;
  s.qk_nope = c.qk_nope_head_dim;
  s.qk_rope = c.qk_rope_head_dim;
  s.v_head_dim = c.v_head_dim;
  s.n_rot = c.qk_rope_head_dim;
  s.pairing = c.rope_interleaved ? "interleaved" : "neox";
  set_rope_scaling(s, c);
  double scale = 1 / std::sqrt(double(s.qk_nope + s.qk_rope));
  if (c.rope_scaling.is_object()) {
    const double factor = c.rope_scaling.value("factor", 1.0);
    const double m = c.rope_scaling.value("mscale_all_dim", 0.0);
    if (m > 0 && factor > 1) {
      const double mscale = 0.1 * m * std::log(factor) + 1.0;
      scale *= mscale * mscale;
    }
  }
  s.scale = scale;
  s.n_experts = c.n_experts;
  s.top_k = c.n_experts_per_tok;
  s.renorm = c.norm_topk_prob;
  s.scoring = c.moe_scoring;
  s.router = "mlp.gate";
  s.selection_bias = "mlp.gate.e_score_correction_bias";
  s.expert_gate = "mlp.experts.{e}.gate_proj";
  s.expert_up = "mlp.experts.{e}.up_proj";
  s.expert_down = "mlp.experts.{e}.down_proj";
  s.groups = c.n_group;
  s.top_groups = c.topk_group;
  s.routed_scale = c.routed_scaling_factor;
  if (c.n_shared_experts > 0) {
    s.shared_gate = "mlp.shared_experts.gate_proj";
    s.shared_up = "mlp.shared_experts.up_proj";
    s.shared_down = "mlp.shared_experts.down_proj";
  }
  for (int64_t l = 0; l < c.n_layers; ++l)
    s.moe_layer[l] = c.n_experts > 0 && l >= c.first_k_dense_replace && l % std::max<int64_t>(1, c.moe_layer_freq) == 0;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
