// Decoders of tokenizer.json: each turns the list of token strings into a new
// list; the tokenizer joins the final list.
#include "core/error.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/regex.h"
#include "model/tokenizer/unicode.h"

namespace bonfire::tok {
namespace {

using nlohmann::json;

// Byte-level tokens back to bytes, then to text with U+FFFD for broken
// sequences. Added tokens are kept verbatim and cut the byte run, as in the
// reference; a character outside the alphabet contributes its own UTF-8 bytes.
class ByteLevel : public Decoder {
 public:
  explicit ByteLevel(const std::unordered_set<std::string>* added) : added_(added) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    bool pending = false;
    auto flush = [&] {
      if (pending) out.push_back(utf8_lossy(bytes));
      bytes.clear();
      pending = false;
    };
    for (const std::string& t : tokens) {
      if (added_ && added_->count(t)) {
        flush();
        out.push_back(t);
        continue;
      }
      pending = true;
      size_t i = 0;
      while (i < t.size()) {
        size_t start = i;
        int b = char_to_byte(utf8_next(t, i));
        if (b >= 0) bytes += static_cast<char>(b);
        else bytes.append(t, start, i - start);
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  const std::unordered_set<std::string>* added_;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Runs of <0xXX> tokens become the text their bytes spell (lossy).
class ByteFallback : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    for (const std::string& t : tokens) {
      int hi = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' ? hex_digit(t[3]) : -1;
      int lo = hi >= 0 ? hex_digit(t[4]) : -1;
      if (lo >= 0) {
        bytes += static_cast<char>(hi * 16 + lo);
        continue;
      }
      if (!bytes.empty()) out.push_back(utf8_lossy(bytes));
      bytes.clear();
      out.push_back(t);
    }
    if (!bytes.empty()) out.push_back(utf8_lossy(bytes));
    tokens.swap(out);
  }
};

class Fuse : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of `content`
// (one character) from every token.
class Strip : public Decoder {
 public:
  Strip(std::string content, int start, int stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    const size_t n = content_.size();
    for (std::string& t : tokens) {
      size_t b = 0, e = t.size();
      for (int i = 0; i < start_ && b + n <= e && t.compare(b, n, content_) == 0; ++i) b += n;
      for (int i = 0; i < stop_ && e >= b + n && t.compare(e - n, n, content_) == 0; ++i) e -= n;
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  int start_, stop_;
};

class Replace : public Decoder {
 public:
  Replace(const json& j, const std::string& where) : content_(j.value("content", std::string())) {
    const json& p = j.value("pattern", json::object());
    if (p.contains("String") && p["String"].is_string()) literal_ = p["String"].get<std::string>();
    else if (p.contains("Regex") && p["Regex"].is_string()) regex_ = std::make_unique<Regex>(p["Regex"].get<std::string>(), where);
    else bad_graph(where + ": Replace decoder needs pattern {\"String\"} or {\"Regex\"}");
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      if (regex_) {
        t = regex_->replace_all(t, content_);
        continue;
      }
      if (literal_.empty()) continue;
      t = replace_all(t, literal_, content_);
    }
  }

 private:
  std::string content_, literal_;
  std::unique_ptr<Regex> regex_;
};

// HF's Metaspace decoder: the replacement becomes a space, and the first
// token loses its leading space unless nothing was prepended at encode time.
class Metaspace : public Decoder {
 public:
  explicit Metaspace(const json& j) {
    replacement_ = j.value("replacement", std::string("\xE2\x96\x81"));
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) strip_first_ = j["prepend_scheme"] != "never";
    else strip_first_ = j.value("add_prefix_space", true);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      size_t prev = 0;
      for (size_t at; (at = t.find(replacement_, prev)) != std::string::npos; prev = at + replacement_.size()) {
        out.append(t, prev, at - prev);
        out += ' ';
      }
      out.append(t, prev, std::string::npos);
      if (i == 0 && strip_first_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// WordPiece: continuation pieces lose their prefix, others get a space.
class WordPiece : public Decoder {
 public:
  explicit WordPiece(const json& j) : prefix_(j.value("prefix", std::string("##"))), cleanup_(j.value("cleanup", true)) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  std::string prefix_;
  bool cleanup_;
};

// BPEDecoder: the end-of-word suffix becomes a space (none after the last).
class BpeSuffix : public Decoder {
 public:
  explicit BpeSuffix(const json& j) : suffix_(j.value("suffix", std::string("</w>"))) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string rep = i + 1 == tokens.size() ? "" : " ";
      for (size_t at = 0; !suffix_.empty() && (at = t.find(suffix_, at)) != std::string::npos; at += rep.size())
        t.replace(at, suffix_.size(), rep);
    }
  }

 private:
  std::string suffix_;
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

void WordPiece::decode_chain(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& t = tokens[i];
    if (i != 0) {
      if (t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
      else t.insert(0, " ");
    }
    if (cleanup_) t = clean_up_tokenization(std::move(t));
  }
}

std::unique_ptr<Decoder> make_decoder(const json& j, const std::string& where,
                                      const std::unordered_set<std::string>* added) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    bad_graph(where + ": decoder must be an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(added);
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip")
    return std::make_unique<Strip>(j.value("content", std::string(" ")), j.value("start", 0), j.value("stop", 0));
  if (type == "Replace") return std::make_unique<Replace>(j, where);
  if (type == "Metaspace") return std::make_unique<Metaspace>(j);
  if (type == "WordPiece") return std::make_unique<WordPiece>(j);
  if (type == "BPEDecoder") return std::make_unique<BpeSuffix>(j);
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) bad_graph(where + ": Sequence decoder needs \"decoders\"");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& sub : j["decoders"])
      if (auto d = make_decoder(sub, where, nullptr)) parts.push_back(std::move(d));
    return std::make_unique<Sequence>(std::move(parts));
  }
  bad_graph(where + ": unsupported decoder type \"" + type + "\"");
}

std::string clean_up_tokenization(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules)
    if (s.find(from) != std::string::npos) s = replace_all(s, from, to);
  return s;
}

}  // namespace bonfire::tok
