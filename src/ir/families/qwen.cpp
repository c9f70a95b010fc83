// Qwen 2 (q/k/v biases) and Qwen 3 (per-head q/k RMSNorm, no biases).
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json qwen_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.family == "qwen2") s.qkv_bias = true;
  if (c.qk_norm) s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
