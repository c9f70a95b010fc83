// Llama and Mistral: the reference decoder (RMSNorm, rope, GQA, SwiGLU).
#include "ir/families/decoder.h"
#include "ir/families/families.h"

namespace bonfire::ir {

json llama_ir(const ModelConfig& c) { return build_decoder_ir(llama_like(c), c); }

}  // namespace bonfire::ir
