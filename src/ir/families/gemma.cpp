// Gemma 1/2/3: embeddings scaled by sqrt(d), RMSNorm weights stored as
// offsets from 1, GeGLU; Gemma 2 adds sandwich norms, attention and final
// logit softcaps and alternating sliding windows; Gemma 3 per-head q/k norms
// and a separate rope base for its local layers.
#include <cmath>

#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json gemma_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.embed_scale = std::sqrt(double(c.hidden_size));
  s.norm_offset = 1;
  s.mlp = "geglu";  // transformers runs Gemma with the tanh GELU whatever hidden_act says
  s.tied = true;
  if (c.family != "gemma") {
    s.post_attn_norm = "post_attention_layernorm";
    s.ffn_norm = "pre_feedforward_layernorm";
    s.post_ffn_norm = "post_feedforward_layernorm";
    s.softcap = c.attn_logit_softcap;
    s.final_softcap = c.final_logit_softcap;
    if (c.query_pre_attn_scalar > 0) s.scale = 1 / std::sqrt(c.query_pre_attn_scalar);
  }
  if (c.family == "gemma3_text") {
    s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
    // Local layers rotate with their own base and without the config's
    // rope_scaling, which transformers applies to the global layers only.
    for (int64_t l = 0; l < c.n_layers; ++l)
      if (c.layer_types[l] == "sliding_attention") {
        s.theta[l] = c.rope_local_theta;
        if (!s.freq_scale.empty()) s.freq_scale[l] = 1;
      }
  }
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
