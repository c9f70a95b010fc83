// Falcon: fused query_key_value grouped per kv head (q heads of the group,
// then k, then v), parallel attention (Falcon-40B: ln_attn and ln_mlp; 7B:
// one input_layernorm), exact GELU, tied output.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json falcon_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  // GGUF metadata does not say; Falcon-7B (the old layout) has one kv head.
  const bool new_arch = c.raw.is_object() && c.raw.contains("new_decoder_architecture")
                            ? c.raw["new_decoder_architecture"].get<bool>()
                            : c.n_kv_heads > 1;
  s.embed = "transformer.word_embeddings.weight";
  s.norm = "layernorm";
  s.layer = "transformer.h.{i}.";
  const int64_t per_group = s.heads / s.kv_heads;
  const std::string bias = c.attention_bias ? "self_attention.query_key_value.bias" : "";
  if (new_arch)
    s.fused = {"self_attention.query_key_value.weight", bias, s.kv_heads,
               {per_group * s.head_dim, s.head_dim, s.head_dim}};
  else
    s.fused = {"self_attention.query_key_value.weight", bias, 1,
               {s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim}};
  s.o = "self_attention.dense";
  s.o_bias = c.attention_bias;
  if (new_arch) {
    s.parallel = "two_norms";
    s.attn_norm = "ln_attn";
    s.ffn_norm = "ln_mlp";
  } else {
    s.parallel = c.parallel_residual ? "shared" : "";
  }
  if (c.alibi) s.alibi = true, s.n_rot = 0;
  s.mlp = c.hidden_act == "gelu" ? "gelu_exact" : "gelu";
  s.up = "mlp.dense_h_to_4h";
  s.down = "mlp.dense_4h_to_h";
  s.mlp_bias = c.mlp_bias;
  s.final_norm = "transformer.ln_f";
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
