// MPT: ALiBi (alibi_bias_max 8 gives BLOOM's slopes), fused Wqkv ([q; k; v]),
// bias-free LayerNorms (the loader supplies zero biases), exact GELU, tied
// output.
#include "core/error.h"
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json mpt_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.alibi && c.alibi_max != 8)
    throw Error(ErrorCode::BadGraph, c.source + ": MPT with alibi_bias_max " + std::to_string(c.alibi_max) +
                                         " has slopes the IR's \"alibi\" softmax does not express");
  s.embed = "transformer.wte.weight";
  s.norm = "layernorm";
  s.layer = "transformer.blocks.{i}.";
  s.attn_norm = "norm_1";
  s.ffn_norm = "norm_2";
  s.fused = {"attn.Wqkv.weight", c.attention_bias ? "attn.Wqkv.bias" : "", 1, {s.d, s.d, s.d}};
  s.o = "attn.out_proj";
  s.o_bias = c.attention_bias;
  s.n_rot = 0;
  s.alibi = c.alibi;
  s.mlp = "gelu_exact";
  s.up = "ffn.up_proj";
  s.down = "ffn.down_proj";
  s.mlp_bias = c.mlp_bias;
  s.final_norm = "transformer.norm_f";
  s.tied = true;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
