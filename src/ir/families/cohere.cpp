// Cohere Command-R: bias-free LayerNorms (the loader gives zero biases),
// attention and the SwiGLU MLP in parallel on one norm of x, rope on
// interleaved pairs, tied embeddings, logits times logit_scale.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json cohere_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.norm = "layernorm";
  s.parallel = "shared";
  s.pairing = "interleaved";
  if (c.logits_scaling > 0) s.logit_scale = 1 / c.logits_scaling;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
