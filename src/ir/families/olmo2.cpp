// OLMo 2: the sublayers read the residual stream unnormed and their outputs
// are normed instead (post_attention_layernorm, post_feedforward_layernorm);
// q_norm and k_norm are RMSNorms over the whole projection, before rope.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json olmo2_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.attn_norm = "";
  s.ffn_norm = "";
  s.post_attn_norm = "post_attention_layernorm";
  s.post_ffn_norm = "post_feedforward_layernorm";
  s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
  s.qk_norm_per_head = false;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
