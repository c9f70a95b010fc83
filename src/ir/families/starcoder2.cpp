// StarCoder2: LayerNorms with biases, biased q/k/v/o projections, a GELU
// (tanh) MLP c_fc → c_proj with biases, rope, tied embeddings by default.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json starcoder2_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.norm = "layernorm";
  s.qkv_bias = s.o_bias = c.attention_bias;
  s.mlp = c.hidden_act == "gelu" ? "gelu_exact" : "gelu";
  s.up = "mlp.c_fc";
  s.down = "mlp.c_proj";
  s.mlp_bias = c.mlp_bias;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
