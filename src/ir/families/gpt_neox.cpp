// GPT-NeoX / Pythia: per-head fused query_key_value ([head][q k v]),
// partial rotary, parallel residual with two LayerNorms, exact GELU.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json gpt_neox_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.embed = "gpt_neox.embed_in.weight";
  s.norm = "layernorm";
  s.layer = "gpt_neox.layers.{i}.";
  s.fused = {"attention.query_key_value.weight", c.attention_bias ? "attention.query_key_value.bias" : "", s.heads,
             {s.head_dim, s.head_dim, s.head_dim}};
  s.o = "attention.dense";
  s.o_bias = c.attention_bias;
  s.parallel = c.parallel_residual ? "two_norms" : "";
  s.mlp = c.hidden_act == "gelu_new" || c.hidden_act == "gelu_pytorch_tanh" ? "gelu" : "gelu_exact";
  s.up = "mlp.dense_h_to_4h";
  s.down = "mlp.dense_4h_to_h";
  s.mlp_bias = true;
  s.final_norm = "gpt_neox.final_layer_norm";
  s.lm_head = "embed_out.weight";
  s.tied = false;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
