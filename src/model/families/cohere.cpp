// Cohere Command-R: bias-free LayerNorms (the loader gives zero biases),
// attention and the SwiGLU MLP in parallel on one norm of x, rope on
// interleaved pairs, tied embeddings, logits times logit_scale.
#include "core/error.h"
#include "model/config_keys.h"
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

using json = nlohmann::json;
using namespace cfg;
using namespace families;

// Command R+'s per-head q/k LayerNorms (use_qk_norm) are refused.
void read_config(const json& j, ModelConfig& c) {
  c.norm = "layernorm";
  c.norm_eps = get_num(j, {"layer_norm_eps"}, 1e-5, c.source);
  c.tie_word_embeddings = get_bool(j, {"tie_word_embeddings"}, true);
  if (get_bool(j, {"use_qk_norm"}, false))
    fail(c.source, "use_qk_norm = true (Command R+'s per-head q/k LayerNorms) is not supported");
  const double scale = get_num(j, {"logit_scale"}, 1.0, c.source);
  if (!(scale > 0)) fail(c.source, "logit_scale = " + std::to_string(scale) + " must be positive");
  c.logits_scaling = 1 / scale;  // the field divides (Granite's meaning)
}

// Command-R's GGUF logit_scale multiplies (llama.cpp scales by it); the
// field divides (Granite's meaning).
void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) {
  if (c.logits_scaling > 0) c.logits_scaling = 1 / c.logits_scaling;
}

void zero_biases(const ModelConfig&, bool, bool, WeightStore& store) {
  add_zero_norm_biases(store, {"input_layernorm.weight", "model.norm.weight"});
}

nlohmann::json document(const ModelConfig& c) {
  DecoderSpec s = llama_like(c);
  s.norm = "layernorm";
  s.parallel = "shared";
  s.pairing = "interleaved";
  if (c.logits_scaling > 0) s.logit_scale = 1 / c.logits_scaling;
  return build_decoder_ir(s, c);
}

}  // namespace

void register_cohere_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"cohere"};
  f.gguf = {{"command-r", "cohere", {"model.layers.", gguf_fix::decoder_global(), gguf_fix::decoder_block()}}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.adapt_weights = zero_biases;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
