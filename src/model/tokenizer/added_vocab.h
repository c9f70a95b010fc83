// Added tokens (tokenizer.json "added_tokens"): found in the raw text before
// anything else runs, longest match first from left to right, as the
// reference's trie splitter does. Matching is on the raw text for every token
// (the reference ignores "normalized"); single_word tokens only match between
// non-word characters; lstrip/rstrip drop the whitespace beside a match.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bonfire::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// A piece of the input: either text for the pipeline or one added token.
struct Section {
  std::string_view text;
  int32_t added_id = -1;  // >= 0 for an added token
  int32_t index = -1;     // which of tokens()
};

class AddedVocab {
 public:
  explicit AddedVocab(std::vector<AddedToken> tokens);
  void split(std::string_view text, std::vector<Section>& out) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> kids;  // sorted by byte
    int32_t token = -1;                                    // index into tokens_
  };
  int32_t child(int32_t node, unsigned char c) const;
  bool boundary_ok(std::string_view text, size_t begin, size_t end) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace bonfire::tok
