// Normalizers of tokenizer.json.
#include "core/error.h"
#include "model/tokenizer/pipeline.h"
#include "model/tokenizer/regex.h"
#include "model/tokenizer/unicode.h"

namespace bonfire::tok {
namespace {

using nlohmann::json;

std::string need_string(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) bad_graph(where + ": normalizer needs string \"" + key + "\"");
  return j[key].get<std::string>();
}

class Unicode : public Normalizer {
 public:
  explicit Unicode(NormForm f) : form_(f) {}
  void normalize(std::string& t) const override { t = tok::normalize(t, form_); }

 private:
  NormForm form_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& t) const override { t = to_lower(t); }
};

class StripAccents : public Normalizer {
 public:
  void normalize(std::string& t) const override { t = strip_marks(t); }
};

// HF prepends only to non-empty text; empty sections never reach normalizers.
class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void normalize(std::string& t) const override {
    if (!t.empty()) t.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

// Replace with a String pattern is a literal replace-all; with a Regex the
// content is inserted literally too.
class Replace : public Normalizer {
 public:
  Replace(const json& j, const std::string& where) : content_(need_string(j, "content", where)) {
    const json& p = j.value("pattern", json::object());
    if (p.contains("String") && p["String"].is_string()) {
      literal_ = p["String"].get<std::string>();
    } else if (p.contains("Regex") && p["Regex"].is_string()) {
      regex_ = std::make_unique<Regex>(p["Regex"].get<std::string>(), where);
    } else {
      bad_graph(where + ": Replace needs pattern {\"String\"} or {\"Regex\"}");
    }
  }
  void normalize(std::string& t) const override {
    if (regex_) {
      t = regex_->replace_all(t, content_);
      return;
    }
    if (literal_.empty() || t.find(literal_) == std::string::npos) return;
    t = replace_all(t, literal_, content_);
  }

 private:
  std::string content_, literal_;
  std::unique_ptr<Regex> regex_;
};

// Strips JavaScript whitespace, as the reference's trim() does.
class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& t) const override {
    std::string_view v = t;
    if (left_) v = js_trim_start(v);
    if (right_) v = js_trim_end(v);
    t = std::string(v);
  }

 private:
  bool left_, right_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& t) const override {
    for (const auto& p : parts_) p->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    bad_graph(where + ": normalizer must be an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "NFC") return std::make_unique<Unicode>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<Unicode>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<Unicode>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<Unicode>(NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Prepend") return std::make_unique<Prepend>(need_string(j, "prepend", where));
  if (type == "Replace") return std::make_unique<Replace>(j, where);
  if (type == "Strip") return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      bad_graph(where + ": Sequence normalizer needs \"normalizers\"");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const json& sub : j["normalizers"])
      if (auto n = make_normalizer(sub, where)) parts.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(parts));
  }
  bad_graph(where + ": unsupported normalizer type \"" + type + "\"");
}

}  // namespace bonfire::tok
