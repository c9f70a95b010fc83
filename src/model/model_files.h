// One entry point for "the model the user pointed at": a Hugging Face folder
// (config.json, *.safetensors, tokenizer.json, tokenizer_config.json,
// generation_config.json, chat_template.jinja) or a single GGUF file. Each
// part loads only when asked, so `bonfire tokenize` on a folder holding just
// the tokenizer files works, and opening weights reads headers, not data.
#pragma once
#include <memory>
#include <vector>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/chat_template/chat_template.h"
#include "model/config.h"
#include "model/tokenizer/tokenizer.h"
#include "model/weights.h"

namespace bonfire {

class GgufFile;

class ModelFiles {
 public:
  // A model folder, its config.json (the folder), or a GGUF file; throws
  // Error naming the path when it is none of them.
  static std::unique_ptr<ModelFiles> open(const std::string& path);

  const std::string& path() const { return path_; }
  bool is_gguf() const { return gguf_ != nullptr; }

  // config.json or the GGUF keys, every size checked against the tensors
  // present and against bounds first (model/config.h).
  ModelConfig config() const;
  // What the checkpoint's tensor names and shapes say (headers only).
  TensorCensus census() const;
  GenerationConfig generation_config() const;
  // lowering_only: for a copy that lowers graphs and never computes with
  // the values (GgufLoadOptions::lowering_only, Family::adapt_weights):
  // tensors the loader would convert keep the file's bytes or become
  // untouched zeros of the converted shape.
  WeightStore weights(bool lowering_only = false) const;
  std::unique_ptr<Tokenizer> tokenizer() const;
  // The chat template and the variables it reads (bos_token, eos_token...);
  // nullopt when the model has none.
  std::optional<ChatTemplate> chat_template(nlohmann::ordered_json* vars) const;

  // The files holding the weights (the GGUF, or the folder's *.safetensors).
  std::vector<std::string> weight_files() const;
  // Reads the weight files once so the first step does not wait on the disk
  // page by page, with a progress bar on a TTY. Skipped when they exceed
  // half of the machine's memory (the mapping then pages in as it goes):
  // false then.
  bool warm() const;

 private:
  std::string path_;
  std::shared_ptr<GgufFile> gguf_;
};

}  // namespace bonfire
