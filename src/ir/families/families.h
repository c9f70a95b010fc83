// IR documents for the Hugging Face families bonfire knows: one module per
// family (families/<family>.cpp), each filling a DecoderSpec from the
// config. ir_for_model is what `bonfire ir from-hf` and `bonfire generate`
// use: a folder's own bonfire.ir.json wins over the generated document.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace bonfire::ir {

// The document for `config`. Throws Error naming the family when bonfire
// has no module for it.
nlohmann::json ir_from_config(const ModelConfig& config);

// Families with a module.
std::vector<std::string> ir_families();

// One function per family (families/<family>.cpp).
nlohmann::json llama_ir(const ModelConfig& c);
nlohmann::json qwen_ir(const ModelConfig& c);
nlohmann::json moe_ir(const ModelConfig& c);
nlohmann::json gemma_ir(const ModelConfig& c);
nlohmann::json phi3_ir(const ModelConfig& c);
nlohmann::json gpt2_ir(const ModelConfig& c);
nlohmann::json gpt_neox_ir(const ModelConfig& c);
nlohmann::json falcon_ir(const ModelConfig& c);
nlohmann::json bloom_ir(const ModelConfig& c);
nlohmann::json granite_ir(const ModelConfig& c);
nlohmann::json deepseek_v3_ir(const ModelConfig& c);
nlohmann::json lfm2_ir(const ModelConfig& c);
nlohmann::json mpt_ir(const ModelConfig& c);
nlohmann::json olmo2_ir(const ModelConfig& c);
nlohmann::json starcoder2_ir(const ModelConfig& c);
nlohmann::json jamba_ir(const ModelConfig& c);
nlohmann::json cohere_ir(const ModelConfig& c);
nlohmann::json mamba2_ir(const ModelConfig& c);

}  // namespace bonfire::ir
