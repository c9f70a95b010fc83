// Qwen 2 (q/k/v biases) and Qwen 3 (per-head q/k RMSNorm, no biases).
#include "model/families/decoder.h"
#include "model/family.h"
#include "model/gguf_fixes.h"

namespace bonfire {

namespace {

void read_config(const nlohmann::json&, ModelConfig& c) { c.qk_norm = c.family == "qwen3"; }

void read_gguf(const GgufKeys&, ModelConfig& c, const TensorCensus*) { c.qk_norm = c.family == "qwen3"; }

nlohmann::json document(const ModelConfig& c) {
  families::DecoderSpec s = families::llama_like(c);
  if (c.family == "qwen2") s.qkv_bias = true, s.o_bias = false;  // transformers: o_proj has none
  if (c.qk_norm) s.q_norm = "self_attn.q_norm", s.k_norm = "self_attn.k_norm";
  return families::build_decoder_ir(s, c);
}

}  // namespace

void register_qwen_family(std::vector<Family>& v) {
  Family f;
  f.model_types = {"qwen2", "qwen3"};
  const GgufNames names = {"model.layers.", gguf_fix::decoder_global(), gguf_fix::decoder_block()};
  f.gguf = {{"qwen2", "qwen2", names}, {"qwen3", "qwen3", names}};
  f.read_config = read_config;
  f.read_gguf = read_gguf;
  f.document = document;
  v.push_back(std::move(f));
}

}  // namespace bonfire
