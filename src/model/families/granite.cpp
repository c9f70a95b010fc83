// Granite: Llama with multipliers on the embedding, the attention scores,
// each residual branch, and a divisor on the logits.
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using json = nlohmann::json;
using namespace cfg;
using namespace families;

void read_config(const json& j, ModelConfig& c) {
  c.attention_multiplier = get_num(j, {"attention_multiplier"}, 0, c.source);
  c.embedding_multiplier = get_num(j, {"embedding_multiplier"}, 0, c.source);
  c.residual_multiplier = get_num(j, {"residual_multiplier"}, 0, c.source);
  c.logits_scaling = get_num(j, {"logits_scaling"}, 0, c.source);
}

nlohmann::json document(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  if (c.embedding_multiplier > 0) s.embed_scale = c.embedding_multiplier;
  if (c.attention_multiplier > 0) s.scale = c.attention_multiplier;
  if (c.residual_multiplier > 0) s.residual_scale = c.residual_multiplier;
  if (c.logits_scaling > 0) s.logit_scale = 1 / c.logits_scaling;
  return build_decoder_ir(s, c);
}

}  // namespace

void register_granite_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"granite"};
  f.gguf = {{"granite", "granite", {"model.layers.", gguf_fix::decoder_global(), gguf_fix::decoder_block()},
             gguf_fix::unpermute_rope}};
  f.read_config = read_config;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
