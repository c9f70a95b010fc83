// Reading hyperparameters out of config.json and GGUF metadata, for the
// family modules (model/family.h). Every reader refuses what it cannot use
// with an Error naming the file and the key: a string where a number
// belongs, 2.5 layers, a size past 2^53. Nothing is cast silently.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace bonfire {

namespace cfg {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& what);

// The first of `keys` present (and not null) in j, or null.
const json* find_key(const json& j, std::initializer_list<const char*> keys);
// The key of `keys` that j spells (the first one when none is present).
std::string key_of(const json& j, std::initializer_list<const char*> keys);
// The first of `keys` present, else `dflt`.
int64_t get_int(const json& j, std::initializer_list<const char*> keys, int64_t dflt, const std::string& src);
double get_num(const json& j, std::initializer_list<const char*> keys, double dflt, const std::string& src);
bool get_bool(const json& j, std::initializer_list<const char*> keys, bool dflt);
std::string get_str(const json& j, std::initializer_list<const char*> keys, const std::string& dflt);
// An id or a list of ids (eos_token_id is either).
std::vector<int64_t> id_list(const json* v);

// The mixture-of-experts keys (num_local_experts, num_experts_per_tok,
// moe_intermediate_size, shared experts, decoder_sparse_step,
// mlp_only_layers, ONNX Runtime's qmoe quantization_config).
void read_moe_keys(const json& j, ModelConfig& c);

}  // namespace cfg

// A GGUF file's `<arch>.*` keys.
class GgufKeys {
 public:
  GgufKeys(const nlohmann::json& kv, std::string arch, std::string source)
      : kv_(kv), arch_(std::move(arch)), src_(std::move(source)) {}
  const std::string& arch() const { return arch_; }
  // `<arch>.<key>`, or null.
  const nlohmann::json* find(const std::string& key) const;
  // Per-layer keys may be arrays (e.g. LFM2's head_count_kv); the largest counts.
  double num(const std::string& key, double dflt) const;
  // Sizes: a value past 2^53 (or not whole) is refused, never cast.
  int64_t integer(const std::string& key, int64_t dflt) const;
  bool flag(const std::string& key, bool dflt) const;

 private:
  const nlohmann::json& kv_;
  std::string arch_, src_;
};

}  // namespace bonfire
