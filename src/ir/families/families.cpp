#include "ir/families/families.h"

#include "core/error.h"

namespace bonfire::ir {

namespace {

struct FamilyModule {
  const char* model_type;
  nlohmann::json (*build)(const ModelConfig&);
};

const FamilyModule kModules[] = {
    {"llama", llama_ir},     {"mistral", llama_ir},      {"qwen2", qwen_ir},       {"qwen3", qwen_ir},
    {"mixtral", moe_ir},     {"qwen2_moe", moe_ir},      {"qwen3_moe", moe_ir},    {"olmoe", moe_ir},
    {"gemma", gemma_ir},     {"gemma2", gemma_ir},       {"gemma3_text", gemma_ir}, {"phi3", phi3_ir},
    {"gpt2", gpt2_ir},       {"gpt_neox", gpt_neox_ir},  {"falcon", falcon_ir},    {"bloom", bloom_ir},
    {"granite", granite_ir}, {"deepseek_v3", deepseek_v3_ir}, {"lfm2", lfm2_ir},        {"mpt", mpt_ir},
    {"olmo2", olmo2_ir},     {"starcoder2", starcoder2_ir}, {"jamba", jamba_ir},       {"cohere", cohere_ir},
    {"mamba2", mamba2_ir},
};

}  // namespace

nlohmann::json ir_from_config(const ModelConfig& c) {
  for (const auto& m : kModules)
    if (c.family == m.model_type) return m.build(c);
  std::string known;
  for (const auto& m : kModules) known += (known.empty() ? "" : ", ") + std::string(m.model_type);
  throw Error(ErrorCode::BadGraph, c.source + ": no IR module for model_type \"" + c.family +
                                       "\" (bonfire has: " + known + "); write a bonfire.ir.json beside the model");
}

std::vector<std::string> ir_families() {
  std::vector<std::string> v;
  for (const auto& m : kModules) v.push_back(m.model_type);
  return v;
}

}  // namespace bonfire::ir
