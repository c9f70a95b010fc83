#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "model/tokenizer/model.h"
#include "model/tokenizer/unicode.h"

namespace bonfire::tok {
namespace {

uint64_t hash_bytes(std::string_view s) { return std::hash<std::string_view>{}(s) | 1; }

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

std::string byte_token_name(int b) {
  static const char* hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
}

// Per-thread cache of word -> ids, one per model (keyed by serial, so a model
// freed and another built at the same address never share entries).
struct WordCache {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Eq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  std::unordered_map<std::string, std::vector<int32_t>, Hash, Eq> map;
};
constexpr size_t kCacheMaxWord = 128;     // longer words rarely repeat
constexpr size_t kCacheMaxEntries = 1 << 16;

WordCache& cache_for(uint64_t serial) {
  thread_local std::vector<std::pair<uint64_t, std::unique_ptr<WordCache>>> caches;
  for (auto& [s, c] : caches)
    if (s == serial) return *c;
  if (caches.size() >= 8) caches.erase(caches.begin());
  caches.emplace_back(serial, std::make_unique<WordCache>());
  return *caches.back().second;
}

std::atomic<uint64_t> next_serial{1};

}  // namespace

// ---------------------------------------------------------------- StrIdMap

void StrIdMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > slots_.size()) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(cap, Slot{});
    count_ = 0;
    for (const Slot& s : old)
      if (s.id >= 0) {
        size_t m = slots_.size() - 1, i = mix(s.hash) & m;
        while (slots_[i].id >= 0) i = (i + 1) & m;
        slots_[i] = s;
        ++count_;
      }
  }
}

void StrIdMap::grow() { reserve(std::max<size_t>(16, slots_.size())); }

void StrIdMap::set(std::string_view key, int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash_bytes(key);
  size_t m = slots_.size() - 1, i = mix(h) & m;
  while (slots_[i].id >= 0) {
    Slot& s = slots_[i];
    if (s.hash == h && std::string_view(arena_.data() + s.off, s.len) == key) {
      s.id = id;
      return;
    }
    i = (i + 1) & m;
  }
  slots_[i] = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id};
  arena_.append(key);
  ++count_;
}

int32_t StrIdMap::find(std::string_view key) const {
  if (slots_.empty()) return -1;
  uint64_t h = hash_bytes(key);
  size_t m = slots_.size() - 1, i = mix(h) & m;
  while (slots_[i].id >= 0) {
    const Slot& s = slots_[i];
    if (s.hash == h && std::string_view(arena_.data() + s.off, s.len) == key) return s.id;
    i = (i + 1) & m;
  }
  return -1;
}

// ---------------------------------------------------------------- Bpe

Bpe::Bpe(const StrIdMap& vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions opts,
         const std::string& where)
    : opts_(std::move(opts)), vocab_(&vocab), serial_(next_serial++), where_(where) {
  for (int b = 0; b < 256; ++b) {
    byte_token_[b] = vocab.find(byte_token_name(b));
    std::string ch;
    utf8_append(ch, byte_to_char()[b]);
    byte_id_[b] = vocab.find(ch);
  }
  if (opts_.raw_bytes) {
    // Keys spelled in the byte alphabet become the raw bytes they stand for.
    raw_vocab_.reserve(vocab.size());
    vocab.for_each([&](std::string_view key, int32_t id) {
      std::string raw;
      size_t i = 0;
      while (i < key.size()) {
        int b = char_to_byte(utf8_next(key, i));
        if (b < 0) return;
        raw += static_cast<char>(b);
      }
      raw_vocab_.set(raw, id);
    });
  }
  size_t cap = 16;
  while (cap < merges.size() * 2) cap <<= 1;
  merge_keys_.assign(cap, 0);
  merge_vals_.assign(cap, Merge{});
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    int32_t ia = vocab.find(a), ib = vocab.find(b), im = vocab.find(a + b);
    if (ia < 0 || ib < 0 || im < 0)
      bad_graph(where + ": merge #" + std::to_string(r) + " \"" + a + " " + b + "\" uses or makes a token not in the vocab");
    uint64_t key = ((static_cast<uint64_t>(static_cast<uint32_t>(ia)) << 32) | static_cast<uint32_t>(ib)) + 1;
    size_t i = mix(key) & (cap - 1);
    while (merge_keys_[i] != 0 && merge_keys_[i] != key) i = (i + 1) & (cap - 1);
    if (merge_keys_[i] == key) continue;  // a repeated merge keeps its first rank
    merge_keys_[i] = key;
    merge_vals_[i] = Merge{static_cast<int32_t>(r), im};
  }
}

Bpe::Merge Bpe::find_merge(int32_t a, int32_t b) const {
  if (a < 0 || b < 0) return {};
  uint64_t key = ((static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b)) + 1;
  size_t m = merge_keys_.size() - 1, i = mix(key) & m;
  while (merge_keys_[i] != 0) {
    if (merge_keys_[i] == key) return merge_vals_[i];
    i = (i + 1) & m;
  }
  return {};
}

void Bpe::emit_unknown(std::string_view piece, std::vector<int32_t>& out) const {
  if (opts_.byte_fallback) {
    bool all = true;
    for (unsigned char c : piece) all &= byte_token_[c] >= 0;
    if (all) {
      for (unsigned char c : piece) out.push_back(byte_token_[c]);
      return;
    }
  }
  if (opts_.unk_id < 0)
    bad_graph(where_ + ": no token for \"" + std::string(piece) + "\" and the model has no unk_token");
  out.push_back(opts_.unk_id);
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const StrIdMap& keys = opts_.raw_bytes ? raw_vocab_ : *vocab_;
  if (opts_.ignore_merges) {
    int32_t id = keys.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > kCacheMaxWord) {
    merge(word, out);
    return;
  }
  WordCache& cache = cache_for(serial_);
  auto it = cache.map.find(word);
  if (it != cache.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  size_t start = out.size();
  merge(word, out);
  if (cache.map.size() >= kCacheMaxEntries) cache.map.clear();
  cache.map.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
}

namespace {
struct Sym {
  int32_t id;
  int32_t prev, next;
  uint32_t begin, len;  // bytes of the word this symbol covers; len 0 = merged away
};
struct Cand {
  int32_t rank, pos, left, right, id;
  bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};
}  // namespace

void Bpe::merge(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Sym> syms;
  thread_local std::vector<Cand> heap;
  thread_local std::string key;
  syms.clear();
  heap.clear();
  if (opts_.raw_bytes) {
    for (size_t i = 0; i < word.size(); ++i)
      syms.push_back({byte_id_[static_cast<unsigned char>(word[i])], 0, 0, static_cast<uint32_t>(i), 1});
  } else {
    const bool affix = !opts_.continuing_subword_prefix.empty() || !opts_.end_of_word_suffix.empty();
    size_t i = 0;
    while (i < word.size()) {
      size_t b = i;
      i += utf8_len(static_cast<unsigned char>(word[i]));
      std::string_view ch = word.substr(b, i - b);
      int32_t id;
      if (!affix) {
        id = vocab_->find(ch);
      } else {
        key.clear();
        if (b > 0) key += opts_.continuing_subword_prefix;
        key += ch;
        if (i >= word.size()) key += opts_.end_of_word_suffix;
        id = vocab_->find(key);
      }
      syms.push_back({id, 0, 0, static_cast<uint32_t>(b), static_cast<uint32_t>(i - b)});
    }
  }
  const int32_t n = static_cast<int32_t>(syms.size());
  for (int32_t k = 0; k < n; ++k) {
    syms[k].prev = k - 1;
    syms[k].next = k + 1 < n ? k + 1 : -1;
  }
  auto push = [&](int32_t pos) {
    if (pos < 0 || syms[pos].next < 0) return;
    int32_t l = syms[pos].id, r = syms[syms[pos].next].id;
    Merge m = find_merge(l, r);
    if (m.rank < 0) return;
    heap.push_back({m.rank, pos, l, r, m.id});
    std::push_heap(heap.begin(), heap.end(), std::greater<Cand>{});
  };
  for (int32_t k = 0; k + 1 < n; ++k) push(k);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Cand>{});
    Cand c = heap.back();
    heap.pop_back();
    Sym& s = syms[c.pos];
    if (s.len == 0 || s.id != c.left || s.next < 0 || syms[s.next].id != c.right) continue;  // stale
    Sym& r = syms[s.next];
    s.id = c.id;
    s.len += r.len;
    r.len = 0;
    s.next = r.next;
    if (s.next >= 0) syms[s.next].prev = c.pos;
    push(s.prev);
    push(c.pos);
  }
  for (int32_t k = 0; k >= 0 && k < n; k = syms[k].next) {
    const Sym& s = syms[k];
    if (s.id >= 0) out.push_back(s.id);
    else emit_unknown(word.substr(s.begin, s.len), out);
  }
}

// ---------------------------------------------------------------- Spm

Spm::Spm(const StrIdMap& vocab, std::vector<float> scores, int32_t unk_id, const std::string& where)
    : vocab_(&vocab), scores_(std::move(scores)), unk_id_(unk_id), where_(where) {
  for (int b = 0; b < 256; ++b) {
    byte_token_[b] = vocab.find(byte_token_name(b));
    if (byte_token_[b] < 0) byte_token_[b] = vocab.find(std::string(1, static_cast<char>(b)));
  }
}

void Spm::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t size;
    bool operator<(const Bigram& o) const { return score < o.score || (score == o.score && left > o.left); }
  };
  std::vector<Sym> syms;
  size_t i = 0;
  while (i < word.size()) {
    size_t b = i;
    i += std::min<size_t>(utf8_len(static_cast<unsigned char>(word[i])), word.size() - i);
    int32_t k = static_cast<int32_t>(syms.size());
    syms.push_back({0, k - 1, -1, static_cast<uint32_t>(b), static_cast<uint32_t>(i - b)});
    if (k > 0) syms[k - 1].next = k;
  }
  std::vector<Bigram> heap;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    std::string_view text = word.substr(syms[l].begin, syms[l].len + syms[r].len);
    int32_t id = vocab_->find(text);
    if (id < 0 || static_cast<size_t>(id) >= scores_.size()) return;
    heap.push_back({scores_[id], l, r, static_cast<uint32_t>(text.size())});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t k = 1; k < static_cast<int32_t>(syms.size()); ++k) try_add(k - 1, k);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Bigram g = heap.back();
    heap.pop_back();
    Sym& l = syms[g.left];
    Sym& r = syms[g.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != g.size || l.next != g.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = g.left;
    try_add(l.prev, g.left);
    try_add(g.left, l.next);
  }
  for (int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[k].next) {
    std::string_view text = word.substr(syms[k].begin, syms[k].len);
    int32_t id = vocab_->find(text);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char c : text) {
      int32_t bt = byte_token_[c] >= 0 ? byte_token_[c] : unk_id_;
      if (bt < 0) bad_graph(where_ + ": no token for byte " + std::to_string(c) + " and no unknown token");
      out.push_back(bt);
    }
  }
}

}  // namespace bonfire::tok
