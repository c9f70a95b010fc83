// Pre-tokenizers of tokenizer.json.
//
// Where the reference (transformers.js) simplifies HF we follow HF, since no
// tokenizer we test depends on the difference: Split honours every behavior
// and `invert` (the reference treats all but Removed as Isolated), Metaspace
// honours prepend_scheme and split, Punctuation isolates each character.
#include <algorithm>
#include <functional>

#include "core/error.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/regex.h"
#include "model/tokenizer/unicode.h"

namespace bonfire::tok {
namespace {

using nlohmann::json;

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const json& j, const std::string& where, Behavior dflt) {
  if (!j.contains("behavior")) return dflt;
  const std::string b = j["behavior"].is_string() ? j["behavior"].get<std::string>() : "";
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  bad_graph(where + ": unknown split behavior \"" + b + "\"");
}

struct Seg {
  size_t begin, end;
  bool match;
};

// Cuts `word` at `matches` and appends the pieces `behavior` keeps, the way
// HF's NormalizedString::split does.
void split_by(std::string_view word, const std::vector<Span>& matches, Behavior behavior, bool invert,
              std::vector<std::string>& out) {
  thread_local std::vector<Seg> segs, kept;  // reused: this runs once per word
  segs.clear();
  kept.clear();
  size_t prev = 0;
  for (const Span& m : matches) {
    if (m.begin > prev) segs.push_back({prev, m.begin, invert});
    segs.push_back({m.begin, m.end, !invert});
    prev = m.end;
  }
  if (prev < word.size()) segs.push_back({prev, word.size(), invert});

  switch (behavior) {
    case Behavior::Removed:
      for (const Seg& s : segs)
        if (!s.match) kept.push_back(s);
      break;
    case Behavior::Isolated: kept.assign(segs.begin(), segs.end()); break;
    case Behavior::MergedWithPrevious: {
      bool prev_match = false;
      for (const Seg& s : segs) {
        if (s.match && !prev_match && !kept.empty()) kept.back().end = s.end;
        else kept.push_back(s);
        prev_match = s.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev_match = false;
      for (size_t i = segs.size(); i-- > 0;) {
        const Seg& s = segs[i];
        if (s.match && !prev_match && !kept.empty()) kept.back().begin = s.begin;
        else kept.push_back(s);
        prev_match = s.match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
    case Behavior::Contiguous: {
      bool prev_match = false;
      for (const Seg& s : segs) {
        if (s.match && prev_match && !kept.empty()) kept.back().end = s.end;
        else kept.push_back(s);
        prev_match = s.match;
      }
      break;
    }
  }
  for (const Seg& s : kept)
    if (s.end > s.begin) out.emplace_back(word.substr(s.begin, s.end - s.begin));
}

// One span per code point that satisfies `pred`.
void char_matches(std::string_view w, const std::function<bool(uint32_t)>& pred, std::vector<Span>& out) {
  size_t i = 0;
  while (i < w.size()) {
    size_t b = i;
    if (pred(utf8_next(w, i))) out.push_back({b, i});
  }
}

// Applies `fn(word, pieces_out)` to every word.
template <class F>
void for_each_word(std::vector<std::string>& words, F fn) {
  std::vector<std::string> out;
  out.reserve(words.size() * 2);
  for (const std::string& w : words) fn(std::string_view(w), out);
  words.swap(out);
}

class Split : public PreTokenizer {
 public:
  Split(const json& j, const std::string& where)
      : behavior_(parse_behavior(j, where, Behavior::Isolated)), invert_(j.value("invert", false)) {
    const json& p = j.value("pattern", json::object());
    if (p.contains("Regex") && p["Regex"].is_string()) regex_ = std::make_unique<Regex>(p["Regex"].get<std::string>(), where);
    else if (p.contains("String") && p["String"].is_string()) literal_ = p["String"].get<std::string>();
    else bad_graph(where + ": Split needs pattern {\"String\"} or {\"Regex\"}");
  }
  Split(std::unique_ptr<Regex> re, Behavior b, bool invert = false)
      : regex_(std::move(re)), behavior_(b), invert_(invert) {}

  void split(std::vector<std::string>& words, int) const override {
    std::vector<Span> m;
    for_each_word(words, [&](std::string_view w, std::vector<std::string>& out) {
      m.clear();
      if (regex_) {
        regex_->find_all(w, m);
      } else if (!literal_.empty()) {
        for (size_t at = 0; (at = w.find(literal_, at)) != std::string_view::npos; at += literal_.size())
          m.push_back({at, at + literal_.size()});
      }
      split_by(w, m, behavior_, invert_, out);
    });
  }

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, bool map_bytes)
      : add_prefix_space_(add_prefix_space), map_bytes_(map_bytes) {
    if (use_regex)
      regex_ = std::make_unique<Regex>(
          "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "ByteLevel");
  }
  void split(std::vector<std::string>& words, int) const override {
    if (!add_prefix_space_ && !regex_ && !map_bytes_) return;  // the model reads raw bytes
    std::vector<Span> m;
    std::string tmp;
    for_each_word(words, [&](std::string_view w, std::vector<std::string>& out) {
      if (add_prefix_space_ && (w.empty() || w[0] != ' ')) {
        tmp = " ";
        tmp += w;
        w = tmp;
      }
      size_t first = out.size();
      if (regex_) {
        m.clear();
        regex_->find_all(w, m);
        split_by(w, m, Behavior::Isolated, false, out);
      } else {
        out.emplace_back(w);
      }
      if (map_bytes_)
        for (size_t k = first; k < out.size(); ++k) {
          std::string mapped;
          for (unsigned char c : out[k]) utf8_append(mapped, byte_to_char()[c]);
          out[k] = std::move(mapped);
        }
    });
  }

 private:
  bool add_prefix_space_, map_bytes_;
  std::unique_ptr<Regex> regex_;
};

class Metaspace : public PreTokenizer {
 public:
  Metaspace(const json& j, const std::string& where) {
    replacement_ = j.value("replacement", std::string("\xE2\x96\x81"));
    split_ = j.value("split", true);
    std::string scheme = j.value("prepend_scheme", std::string(j.value("add_prefix_space", true) ? "always" : "never"));
    if (scheme != "always" && scheme != "first" && scheme != "never")
      bad_graph(where + ": unknown Metaspace prepend_scheme \"" + scheme + "\"");
    scheme_ = scheme;
  }
  void split(std::vector<std::string>& words, int section) const override {
    std::vector<Span> m;
    for_each_word(words, [&](std::string_view w, std::vector<std::string>& out) {
      std::string t;
      for (char c : w) {
        if (c == ' ') t += replacement_;
        else t += c;
      }
      bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == "always" || (scheme_ == "first" && section == 0))) t.insert(0, replacement_);
      if (!split_) {
        out.push_back(std::move(t));
        return;
      }
      m.clear();
      for (size_t at = 0; (at = t.find(replacement_, at)) != std::string::npos; at += replacement_.size())
        m.push_back({at, at + replacement_.size()});
      split_by(t, m, Behavior::MergedWithNext, false, out);
    });
  }

 private:
  std::string replacement_, scheme_;
  bool split_;
};

// Digits, WhitespaceSplit, Punctuation: a character class and a behavior.
class CharSplit : public PreTokenizer {
 public:
  CharSplit(std::function<bool(uint32_t)> pred, Behavior b) : pred_(std::move(pred)), behavior_(b) {}
  void split(std::vector<std::string>& words, int) const override {
    std::vector<Span> m;
    for_each_word(words, [&](std::string_view w, std::vector<std::string>& out) {
      m.clear();
      char_matches(w, pred_, m);
      split_by(w, m, behavior_, false, out);
    });
  }

 private:
  std::function<bool(uint32_t)> pred_;
  Behavior behavior_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::vector<std::string>& words, int section) const override {
    for (const auto& p : parts_) p->split(words, section);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

bool is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

std::unique_ptr<PreTokenizer> make_one(const json& j, const std::string& where, bool raw_bytes) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    bad_graph(where + ": pre_tokenizer must be an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "Split") return std::make_unique<Split>(j, where);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(j.value("add_prefix_space", true), j.value("use_regex", true), !raw_bytes);
  if (type == "Metaspace") return std::make_unique<Metaspace>(j, where);
  if (type == "Digits")
    return std::make_unique<CharSplit>(is_ascii_digit, j.value("individual_digits", false) ? Behavior::Isolated
                                                                                           : Behavior::Contiguous);
  if (type == "WhitespaceSplit") return std::make_unique<CharSplit>(is_unicode_space, Behavior::Removed);
  if (type == "Punctuation")
    return std::make_unique<CharSplit>(is_punctuation, parse_behavior(j, where, Behavior::Isolated));
  if (type == "Whitespace") {
    // HF's Whitespace: keep the matches of \w+|[^\w\s]+ (Unicode classes).
    return std::make_unique<Split>(std::make_unique<Regex>("\\w+|[^\\w\\s]+", where, false), Behavior::Removed, true);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(std::make_unique<CharSplit>(is_unicode_space, Behavior::Removed));
    parts.push_back(std::make_unique<CharSplit>(is_punctuation, Behavior::Isolated));
    return std::make_unique<Sequence>(std::move(parts));
  }
  bad_graph(where + ": unsupported pre_tokenizer type \"" + type + "\"");
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const std::string& where, PreTokenizerOptions* opts) {
  if (j.is_null()) return nullptr;
  bool is_seq = j.is_object() && j.value("type", "") == "Sequence";
  if (!is_seq) {
    bool tail = opts && opts->allow_raw && j.is_object() && j.value("type", "") == "ByteLevel";
    if (opts) opts->raw_byte_level_tail = tail;
    return make_one(j, where, tail);
  }
  if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
    bad_graph(where + ": Sequence pre_tokenizer needs \"pretokenizers\"");
  const json& list = j["pretokenizers"];
  int byte_levels = 0;
  for (const json& x : list) byte_levels += x.is_object() && x.value("type", "") == "ByteLevel";
  bool tail = opts && opts->allow_raw && byte_levels == 1 && list.back().is_object() &&
              list.back().value("type", "") == "ByteLevel";
  if (opts) opts->raw_byte_level_tail = tail;
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].is_object() && list[i].value("type", "") == "Sequence") {
      parts.push_back(make_pre_tokenizer(list[i], where, nullptr));
      continue;
    }
    parts.push_back(make_one(list[i], where, tail && i + 1 == list.size()));
  }
  return std::make_unique<Sequence>(std::move(parts));
}

std::unique_ptr<PreTokenizer> make_regex_sequence(const std::vector<std::string>& regexes, const std::string& where) {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  for (const std::string& r : regexes)
    parts.push_back(std::make_unique<Split>(std::make_unique<Regex>(r, where), Behavior::Isolated));
  parts.push_back(std::make_unique<ByteLevel>(false, false, false));
  return std::make_unique<Sequence>(std::move(parts));
}

}  // namespace bonfire::tok
