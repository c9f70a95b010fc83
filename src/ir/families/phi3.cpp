// Phi-3: fused qkv_proj and gate_up_proj; LongRoPE frequency factors.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json phi3_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.fused = {"self_attn.qkv_proj.weight", "", 1,
             {s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim}};
  s.mlp = "fused_swiglu";
  s.gate = "mlp.gate_up_proj";
  s.ffn = c.intermediate_size;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
