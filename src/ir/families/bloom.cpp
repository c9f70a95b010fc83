// BLOOM: ALiBi instead of rope, a LayerNorm right after the embedding,
// per-head fused query_key_value with biases, tanh GELU, tied output.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json bloom_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.embed = "transformer.word_embeddings.weight";
  s.embed_norm = "transformer.word_embeddings_layernorm";
  s.norm = "layernorm";
  s.layer = "transformer.h.{i}.";
  s.fused = {"self_attention.query_key_value.weight", "self_attention.query_key_value.bias", s.heads,
             {s.head_dim, s.head_dim, s.head_dim}};
  s.o = "self_attention.dense";
  s.o_bias = true;
  s.n_rot = 0;
  s.alibi = true;
  s.mlp = "gelu";
  s.up = "mlp.dense_h_to_4h";
  s.down = "mlp.dense_4h_to_h";
  s.mlp_bias = true;
  s.final_norm = "transformer.ln_f";
  s.tied = true;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
