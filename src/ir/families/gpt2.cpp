// GPT-2: learned positions, LayerNorm with biases, one fused c_attn
// ([q; k; v]), tanh GELU, tied output. The loader gives Conv1D weights as
// [out, in] (docs/IR.md §3).
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json gpt2_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.embed = "transformer.wte.weight";
  s.pos_embed = "transformer.wpe.weight";
  s.norm = "layernorm";
  s.layer = "transformer.h.{i}.";
  s.attn_norm = "ln_1";
  s.ffn_norm = "ln_2";
  s.fused = {"attn.c_attn.weight", "attn.c_attn.bias", 1, {s.d, s.d, s.d}};
  s.o = "attn.c_proj";
  s.o_bias = true;
  s.n_rot = 0;
  s.mlp = c.hidden_act == "gelu" ? "gelu_exact" : "gelu";
  s.up = "mlp.c_fc";
  s.down = "mlp.c_proj";
  s.mlp_bias = true;
  s.final_norm = "transformer.ln_f";
  s.tied = true;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
