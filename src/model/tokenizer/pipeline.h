// The stages of tokenizer.json around the model: normalizers, pre-tokenizers
// and decoders, each built from its JSON object. Unknown types are refused
// with an Error naming the file (`where`) and the type.
//
// Semantics follow HF tokenizers; where the reference the goldens come from
// (transformers.js) behaves differently on the same input we follow the
// reference, and say so beside the class.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

namespace bonfire::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};
// Returns null for a JSON null.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& where);

// Splits text into the words the model encodes. `section` is the index of the
// text between added tokens (Metaspace's prepend_scheme "first" uses it).
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void split(std::vector<std::string>& words, int section) const = 0;
};

// How the byte-level step is done. When ByteLevel is the last pre-tokenizer,
// the model is handed raw bytes and works on them directly (its vocabulary is
// translated once at load), which avoids re-encoding every word.
struct PreTokenizerOptions {
  bool allow_raw = true;             // in: the model can take raw bytes
  bool raw_byte_level_tail = false;  // out: the last step is ByteLevel, left to the model
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& where,
                                                 PreTokenizerOptions* opts);

// Builds the GPT-2 style ByteLevel pre-tokenizer of a GGUF file: the regexes
// split in turn (Isolated), then bytes are left raw for the model.
std::unique_ptr<PreTokenizer> make_regex_sequence(const std::vector<std::string>& regexes, const std::string& where);

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
// `added` (the added tokens' contents) is handed to a top-level ByteLevel
// decoder only, which passes those tokens through untouched, as the reference
// does; nested decoders get none.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const std::string& where,
                                      const std::unordered_set<std::string>* added);

// transformers' clean_up_tokenization: drops the space before . ? ! , and
// English contractions ("do n't" -> "don't").
std::string clean_up_tokenization(std::string s);

}  // namespace bonfire::tok
