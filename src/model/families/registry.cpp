// The one list of family modules (model/family.h).
#include <algorithm>

#include "core/error.h"
#include "model/family.h"

namespace bonfire {

// One per file under model/families/.
void register_llama_family(std::vector<Family>& v);
void register_qwen_family(std::vector<Family>& v);
void register_moe_family(std::vector<Family>& v);
void register_gemma_family(std::vector<Family>& v);
void register_phi3_family(std::vector<Family>& v);
void register_gpt2_family(std::vector<Family>& v);
void register_gpt_neox_family(std::vector<Family>& v);
void register_falcon_family(std::vector<Family>& v);
void register_bloom_family(std::vector<Family>& v);
void register_mpt_family(std::vector<Family>& v);
void register_granite_family(std::vector<Family>& v);
void register_deepseek_v3_family(std::vector<Family>& v);
void register_lfm2_family(std::vector<Family>& v);
void register_olmo2_family(std::vector<Family>& v);
void register_starcoder2_family(std::vector<Family>& v);
void register_jamba_family(std::vector<Family>& v);
void register_cohere_family(std::vector<Family>& v);
void register_mamba2_family(std::vector<Family>& v);

const std::vector<Family>& family_registry() {
  static const std::vector<Family> families = [] {
    std::vector<Family> v;
    register_llama_family(v);
    register_qwen_family(v);
    register_moe_family(v);
    register_gemma_family(v);
    register_phi3_family(v);
    register_gpt2_family(v);
    register_gpt_neox_family(v);
    register_falcon_family(v);
    register_bloom_family(v);
    register_mpt_family(v);
    register_granite_family(v);
    register_deepseek_v3_family(v);
    register_lfm2_family(v);
    register_olmo2_family(v);
    register_starcoder2_family(v);
    register_jamba_family(v);
    register_cohere_family(v);
    register_mamba2_family(v);
    return v;
  }();
  return families;
}

const Family* find_family(const std::string& model_type) {
  for (const Family& f : family_registry())
    for (const char* t : f.model_types)
      if (model_type == t) return &f;
  return nullptr;
}

const Family* find_gguf_family(const std::string& arch, const GgufArch** entry) {
  for (const Family& f : family_registry())
    for (const GgufArch& a : f.gguf)
      if (arch == a.arch) {
        if (entry) *entry = &a;
        return &f;
      }
  return nullptr;
}

const std::vector<std::string>& known_families() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Family& f : family_registry())
      for (const char* t : f.model_types) v.push_back(t);
    return v;
  }();
  return names;
}

std::string known_model_types_text() {
  std::string names;
  for (const std::string& t : known_families()) names += (names.empty() ? "" : ", ") + t;
  return names;
}

void add_zero_norm_biases(WeightStore& store, std::initializer_list<const char*> weight_suffixes) {
  for (const std::string& name : store.names()) {
    if (std::none_of(weight_suffixes.begin(), weight_suffixes.end(), [&](const char* w) { return name.ends_with(w); }))
      continue;
    const std::string bias = name.substr(0, name.size() - 6) + "bias";
    if (!store.find(bias)) store.put(bias, Tensor::zeros(store.find(name)->shape), "zeros (bias-free LayerNorm)");
  }
}

nlohmann::json family_document(const ModelConfig& c) {
  const Family* f = find_family(c.family);
  if (!f || !f->document)
    throw Error(ErrorCode::BadGraph, c.source + ": no IR module for model_type \"" + c.family + "\" (bonfire has: " +
                                         known_model_types_text() + "); write a bonfire.ir.json beside the model");
  try {
    return f->document(c);
  } catch (const nlohmann::json::exception& e) {  // a config value of a type the module did not expect
    throw Error(ErrorCode::BadGraph, c.source + ": a value has the wrong type for model_type \"" + c.family +
                                         "\" (" + e.what() + ")");
  }
}

}  // namespace bonfire
