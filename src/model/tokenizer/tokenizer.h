// Text <-> token ids, loaded from a Hugging Face tokenizer.json (plus the
// optional tokenizer_config.json) or from the tokenizer.ggml.* metadata of a
// GGUF file. Encoding gives the ids the reference gives: @lenml/tokenizers
// (transformers.js), with HF transformers' rule that Llama/Gemma tokenizers
// take their BOS/EOS template from add_bos_token/add_eos_token; the goldens
// under goldens/tokenizers/ hold it to that on five real tokenizers.
//
// What is supported, and what is refused with an Error naming the file:
//   models:          BPE (byte-level or SentencePiece-style with byte_fallback);
//                    GGUF "gpt2" and "llama" (llama.cpp's SPM algorithm).
//                    WordPiece and Unigram are refused.
//   normalizers:     NFC NFD NFKC NFKD Lowercase StripAccents Prepend Replace
//                    Strip Sequence.
//   pre-tokenizers:  ByteLevel Split Metaspace Digits Whitespace WhitespaceSplit
//                    Punctuation BertPreTokenizer Sequence.
//   post-processors: TemplateProcessing ByteLevel BertProcessing
//                    RobertaProcessing Sequence (single sequences only).
//   decoders:        ByteLevel Metaspace ByteFallback Fuse Strip Replace
//                    WordPiece BPEDecoder Sequence.
// Added tokens are split out of the raw text first, longest match first, and
// never reach the normalizer or the model; lstrip/rstrip trim the whitespace
// next to them, single_word requires non-word characters around them.
//
// Input text must be valid UTF-8: encode() refuses anything else with an
// Error naming the byte offset (HF's tokenizers only take valid strings, and
// guessing a repair would give ids nobody else gives). Decoded text is valid
// UTF-8: byte sequences that do not form characters become U+FFFD.
//
// A Tokenizer is immutable after loading; encode/decode may run concurrently.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace bonfire {
namespace tok {
class Model;
class Normalizer;
class PreTokenizer;
class Decoder;
class StrIdMap;
class AddedVocab;
}  // namespace tok

class Tokenizer {
 public:
  // `tokenizer_config_json` may be "" (no config). Errors name the file.
  static std::unique_ptr<Tokenizer> from_files(const std::string& tokenizer_json,
                                               const std::string& tokenizer_config_json);
  // The same from parsed JSON; `where` names the source in errors.
  static std::unique_ptr<Tokenizer> from_json(const nlohmann::json& tokenizer, const nlohmann::json& config,
                                              const std::string& where);
  // GGUF metadata as JSON: {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": [...], ...}.
  static std::unique_ptr<Tokenizer> from_gguf_metadata(const nlohmann::json& kv);
  ~Tokenizer();

  // add_special: the BOS/EOS/CLS... the post-processor adds, as HF's
  // encode(text) does by default. Added tokens in the text are always matched.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  // Incremental decoding for generation: push() returns the text that became
  // final, never part of a UTF-8 character; the concatenation of everything
  // returned, flush() included, equals decode() of all pushed ids.
  class Stream {
   public:
    std::string push(int32_t id);
    std::string flush();

   private:
    friend class Tokenizer;
    Stream(const Tokenizer* t, bool skip_special) : tok_(t), skip_special_(skip_special) {}
    std::string release(std::string text, bool final);
    const Tokenizer* tok_;
    bool skip_special_;
    std::vector<int32_t> window_;  // ids whose text is not final, after `context_` already-emitted ones
    size_t context_ = 0;
    std::string prefix_;  // decoded text of the context ids
    std::string held_;    // text held back because cleanup may still change it
  };
  Stream stream(bool skip_special = false) const;

  int32_t bos_id() const { return bos_id_; }  // -1 when there is none
  std::vector<int32_t> eos_ids() const { return eos_ids_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }
  std::optional<int32_t> token_id(std::string_view token) const;
  // Throws Error for ids outside [0, vocab_size()).
  const std::string& token(int32_t id) const;
  bool is_special(int32_t id) const { return special_ids_.count(id) != 0; }

 private:
  Tokenizer();
  void encode_section(std::string_view text, int section, std::vector<int32_t>& ids) const;
  std::string decode_raw(const int32_t* ids, size_t n, bool skip_special) const;
  void load_model(const nlohmann::json& model, const nlohmann::json& pre_tokenizer, const nlohmann::json& added);
  void load_added(const nlohmann::json& added);
  void load_post_processor(const nlohmann::json& pp, const nlohmann::json& config);
  void template_from(const nlohmann::json& pp, std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) const;
  void load_config(const nlohmann::json& config);
  int32_t config_token_id(const nlohmann::json& config, const char* key) const;

  std::string where_;
  std::vector<std::string> id_to_token_;
  std::unique_ptr<tok::StrIdMap> token_to_id_;  // model vocab, then added tokens over it
  std::unique_ptr<tok::AddedVocab> added_;
  std::unordered_set<std::string> added_contents_;
  std::unordered_set<int32_t> special_ids_;
  std::unique_ptr<tok::Normalizer> normalizer_;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tok::Model> model_;
  std::unique_ptr<tok::Decoder> decoder_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // what add_special puts around the text
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;
  std::string end_of_word_suffix_;
  bool cleanup_ = true;        // clean_up_tokenization_spaces
  bool remove_space_ = false;  // tokenizer_config remove_space
  int32_t bos_id_ = -1, pad_id_ = -1;
  std::vector<int32_t> eos_ids_;
};

}  // namespace bonfire
