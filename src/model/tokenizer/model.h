// Tokenizer models: turn one pre-tokenized word into ids.
//
// Bpe is HF's BPE (merges by rank, lowest first, leftmost on ties) with
// ignore_merges, byte_fallback, unk, continuing_subword_prefix and
// end_of_word_suffix. For byte-level vocabularies it can work on raw bytes: the
// vocabulary is translated once through GPT-2's byte alphabet, so words are
// never re-encoded. Results of short words are kept in a per-thread cache.
//
// Spm is llama.cpp's SentencePiece algorithm for GGUF "llama" vocabularies:
// adjacent pieces whose concatenation is a token merge, highest score first.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bonfire::tok {

// Open-addressing map from byte strings to ids; keys live in one arena.
class StrIdMap {
 public:
  void reserve(size_t n);
  void set(std::string_view key, int32_t id);  // inserts or overwrites
  int32_t find(std::string_view key) const;    // -1 when absent
  size_t size() const { return count_; }
  template <class F>
  void for_each(F f) const {
    for (const Slot& s : slots_)
      if (s.id >= 0) f(std::string_view(arena_.data() + s.off, s.len), s.id);
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t off = 0, len = 0;
    int32_t id = -1;
  };
  void grow();
  std::vector<Slot> slots_;
  std::string arena_;
  size_t count_ = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `word`. Throws Error when a piece has no id and the
  // model has neither byte fallback nor an unk token.
  virtual void encode_word(std::string_view word, std::vector<int32_t>& out) const = 0;
};

struct BpeOptions {
  bool raw_bytes = false;  // words are raw bytes; keys were byte-level encoded
  bool ignore_merges = false;
  bool byte_fallback = false;
  int32_t unk_id = -1;
  std::string continuing_subword_prefix, end_of_word_suffix;
};

class Bpe : public Model {
 public:
  // `vocab` maps token strings (as written in the file, added tokens
  // included) to ids; merges are pairs of token strings in rank order.
  Bpe(const StrIdMap& vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions opts,
      const std::string& where);
  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank = -1, id = -1;
  };
  Merge find_merge(int32_t a, int32_t b) const;
  void merge(std::string_view word, std::vector<int32_t>& out) const;
  void emit_unknown(std::string_view piece, std::vector<int32_t>& out) const;

  BpeOptions opts_;
  const StrIdMap* vocab_;      // strings as in the file
  StrIdMap raw_vocab_;         // raw-byte keys, when opts_.raw_bytes
  int32_t byte_id_[256];       // raw mode: id of each single byte
  int32_t byte_token_[256];    // <0xXX> tokens for byte fallback, -1 if absent
  std::vector<uint64_t> merge_keys_;  // open addressing: (a << 32 | b) + 1, 0 = empty
  std::vector<Merge> merge_vals_;
  uint64_t serial_;            // identifies this model's per-thread cache
  std::string where_;
};

class Spm : public Model {
 public:
  Spm(const StrIdMap& vocab, std::vector<float> scores, int32_t unk_id, const std::string& where);
  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;

 private:
  const StrIdMap* vocab_;
  std::vector<float> scores_;
  int32_t unk_id_;
  int32_t byte_token_[256];
  std::string where_;
};

}  // namespace bonfire::tok
