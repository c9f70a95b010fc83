// LFM2: gated short-convolution layers mixed with GQA attention layers
// (per-head q/k norms), SwiGLU feed-forward (w1/w3/w2); its final norm is
// called embedding_norm.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json lfm2_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.attn_norm = "operator_norm";
  s.ffn_norm = "ffn_norm";
  s.o = "self_attn.out_proj";
  s.q_norm = "self_attn.q_layernorm", s.k_norm = "self_attn.k_layernorm";
  s.gate = "feed_forward.w1";
  s.up = "feed_forward.w3";
  s.down = "feed_forward.w2";
  s.final_norm = "model.embedding_norm";
  s.conv_kernel = c.conv_kernel;
  for (int64_t l = 0; l < c.n_layers; ++l) s.conv_layer[l] = c.layer_types[l] == "conv";
  s.tied = c.tie_word_embeddings;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
