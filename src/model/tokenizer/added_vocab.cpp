#include "model/tokenizer/added_vocab.h"

#include <algorithm>

#include "model/tokenizer/unicode.h"

namespace bonfire::tok {
namespace {

// The code point that ends just before byte `end` (text must be valid UTF-8).
uint32_t cp_before(std::string_view text, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return utf8_next(text, b);
}

bool is_word_char(uint32_t cp) { return cp == '_' || is_letter_or_number(cp); }

}  // namespace

AddedVocab::AddedVocab(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& c = tokens_[t].content;
    if (c.empty()) continue;
    first_byte_[static_cast<unsigned char>(c[0])] = true;
    int32_t node = 0;
    for (unsigned char ch : c) {
      int32_t next = child(node, ch);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& kids = nodes_[node].kids;
        kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(ch, int32_t{-1})), {ch, next});
      }
      node = next;
    }
    nodes_[node].token = static_cast<int32_t>(t);  // a later duplicate wins, as in a JS Map
  }
}

int32_t AddedVocab::child(int32_t node, unsigned char c) const {
  const auto& kids = nodes_[node].kids;
  auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t{-1}));
  return it != kids.end() && it->first == c ? it->second : -1;
}

bool AddedVocab::boundary_ok(std::string_view text, size_t begin, size_t end) const {
  if (begin > 0 && is_word_char(cp_before(text, begin))) return false;
  size_t i = end;
  if (end < text.size() && is_word_char(utf8_next(text, i))) return false;
  return true;
}

void AddedVocab::split(std::string_view text, std::vector<Section>& out) const {
  size_t start = 0, i = 0;
  int32_t found[64];
  size_t found_end[64];
  while (i < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    // Walk the trie, remembering every token that ends on the way.
    int nfound = 0;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      if (nodes_[node].token >= 0 && nfound < 64) {
        found[nfound] = nodes_[node].token;
        found_end[nfound++] = j + 1;
      }
    }
    int pick = -1;
    for (int k = nfound - 1; k >= 0; --k)  // longest first
      if (!tokens_[found[k]].single_word || boundary_ok(text, i, found_end[k])) {
        pick = k;
        break;
      }
    if (pick < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[found[pick]];
    if (i > start) out.push_back({text.substr(start, i - start), -1});
    out.push_back({std::string_view(tok.content), tok.id, found[pick]});
    i = found_end[pick];
    start = i;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});

  // lstrip/rstrip: trim the neighbouring text, as the reference does.
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k].added_id < 0) continue;
    const AddedToken* t = &tokens_[out[k].index];
    if (t->lstrip && k > 0 && out[k - 1].added_id < 0) out[k - 1].text = js_trim_end(out[k - 1].text);
    if (t->rstrip && k + 1 < out.size() && out[k + 1].added_id < 0) out[k + 1].text = js_trim_start(out[k + 1].text);
  }
}

}  // namespace bonfire::tok
