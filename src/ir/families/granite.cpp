// Granite: Llama with multipliers on the embedding, the attention scores,
// each residual branch, and a divisor on the logits.
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json granite_ir(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.embedding_multiplier > 0) s.embed_scale = c.embedding_multiplier;
  if (c.attention_multiplier > 0) s.scale = c.attention_multiplier;
  if (c.residual_multiplier > 0) s.residual_scale = c.residual_multiplier;
  if (c.logits_scaling > 0) s.logit_scale = 1 / c.logits_scaling;
  return build_decoder_ir(s, c);
}

}  // namespace bonfire::ir
