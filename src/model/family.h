// Everything bonfire knows about one family of checkpoints, in one module
// (src/model/families/<family>.cpp), registered in one table
// (families/registry.cpp), as ops/op.h + ops/registry.cpp do for ops:
//
//  - how its config.json reads (after the keys every family shares);
//  - which llama.cpp architectures its GGUF files carry, how their
//    `<arch>.*` keys read, what its GGUF tensors are called in Hugging Face's
//    names, and which of the converter's row moves and value shifts to undo;
//  - the IR document it is (docs/IR.md), usually a DecoderSpec
//    (families/decoder.h) filled from the config.
//
// The readers (config.cpp, config_gguf.cpp, gguf_names.cpp, model_files.cpp)
// hold only what all families share and look the rest up here; nothing
// outside src/model/families/ branches on a family's name. To add a family:
// one file under families/, one line in registry.cpp, and a writer family in
// scripts/modelwriter/ for its tests (docs/IR.md §16).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/gguf_names.h"
#include "model/weights.h"

namespace bonfire {

class GgufFile;
class GgufKeys;

// One GGUF name (without "blk.N." and without its ".weight"/".bias" suffix,
// unless the suffix itself is renamed) and its Hugging Face counterpart
// ("{e}" marks the expert index of a stacked *_exps tensor).
struct GgufRename {
  const char* gguf;
  const char* hf;
};
using GgufRenames = std::vector<GgufRename>;

struct GgufNames {
  std::string block_prefix;  // HF prefix of layer N, before N ("model.layers.")
  GgufRenames global;        // outside the blocks
  GgufRenames block;         // inside blk.N
};

// One GGUF tensor on its way into the store under its HF name.
struct GgufTensorFix {
  const GgufFile& file;
  const std::string& arch;
  const std::string& gguf_name;  // "blk.3.attn_q.weight"
  int64_t layer;                 // 3; -1 outside the blocks
  const std::string& rest;       // "attn_q.weight": the name after "blk.N."
  const GgufLoadOptions& options;  // hf_layout: undo the converter's row moves; lowering_only: shapes suffice
};

// One llama.cpp architecture (general.architecture) a family's GGUF files carry.
struct GgufArch {
  const char* arch;
  const char* model_type;  // the HF model_type its files read as
  GgufNames names;
  // May rename `hf` and replace `t` (row moves, value shifts, squeezed
  // shapes the converter made). Null: the tensor is a view under its name.
  void (*fix_tensor)(const GgufTensorFix& in, std::string& hf, Tensor& t) = nullptr;
  // After every tensor is in: tensors HF has that the converter split
  // (DeepSeek's kv_b_proj). Null: none.
  void (*finish)(const GgufFile& file, const GgufLoadOptions& options, WeightStore& store) = nullptr;
};

struct Family {
  std::vector<const char*> model_types;  // HF model_type values this module reads
  std::vector<GgufArch> gguf;

  // config.json, after the keys all families share (read_common_keys).
  void (*read_config)(const nlohmann::json& j, ModelConfig& c) = nullptr;
  // A GGUF file's `<arch>.*` keys, after the shared ones. May change
  // c.family (llama.cpp files Mixtral as "llama"). Null: nothing more.
  void (*read_gguf)(const GgufKeys& k, ModelConfig& c, const TensorCensus* have) = nullptr;
  // Checks the config must pass once read from either file, after the size
  // checks (DeepSeek's latent ranks). Null: none.
  void (*check)(const ModelConfig& c) = nullptr;
  // Tensors the IR reads under a name or in a form the checkpoint lacks
  // (zero biases of bias-free LayerNorms, GPT-2's transposed Conv1D).
  // `from_gguf` says which file the store came from. Null: none.
  // `lowering_only`: the store is for lowering graphs (ModelFiles::weights),
  // so a converted tensor needs its shape and dtype, not its values.
  void (*adapt_weights)(const ModelConfig& c, bool from_gguf, bool lowering_only, WeightStore& store) = nullptr;

  // The IR document for the config (Error naming what does not fit).
  nlohmann::json (*document)(const ModelConfig& c) = nullptr;
};

// Every family, in registration order (families/registry.cpp).
const std::vector<Family>& family_registry();
// The family reading this HF model_type, or null.
const Family* find_family(const std::string& model_type);
// The family and the architecture entry for a GGUF general.architecture, or null.
const Family* find_gguf_family(const std::string& arch, const GgufArch** entry = nullptr);
// "llama, mistral, ..." for error messages.
std::string known_model_types_text();

// For adapt_weights: zeros under the bias name of every LayerNorm weight
// ending in one of `weight_suffixes` that has no bias (the IR's layernorm
// reads one; MPT's and Cohere's have none).
void add_zero_norm_biases(WeightStore& store, std::initializer_list<const char*> weight_suffixes);

// The IR document for `config` (its family's `document`). Throws Error
// naming the model_type when no family has one.
nlohmann::json family_document(const ModelConfig& config);

}  // namespace bonfire
