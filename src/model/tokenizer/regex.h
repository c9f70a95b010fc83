// Regexes of tokenizer.json (Split patterns, Replace patterns) compiled with
// PCRE2 in UTF + UCP mode, JIT-compiled when the library supports it.
//
// Patterns are written for HF (Oniguruma) and run by the reference in
// JavaScript; where the dialects disagree we follow JavaScript, the reference
// the goldens come from: \s is JS's whitespace set (U+FEFF yes, U+0085 no),
// \d and \w are ASCII, `.` stops at \n \r U+2028 U+2029, $ only matches at the
// end, \uXXXX escapes are accepted, and the inline (?i:'s|'t|...) group of
// GPT-4-style patterns is rewritten to explicit [sS] classes as the reference
// does. After an empty match the search resumes one character later.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace bonfire::tok {

struct Span {
  size_t begin, end;
};

class Regex {
 public:
  // `js_dialect` false compiles the pattern as plain PCRE2 (our own patterns).
  // Throws Error(BadGraph) "<where>: bad regex ...".
  Regex(const std::string& pattern, const std::string& where, bool js_dialect = true);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches, left to right; empty matches are skipped.
  // `text` must be valid UTF-8.
  void find_all(std::string_view text, std::vector<Span>& out) const;

  // Replaces every match with `content` (literally: no $1 substitution).
  std::string replace_all(std::string_view text, std::string_view content) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// Rewrites a pattern from the JavaScript dialect into PCRE2 syntax.
std::string js_to_pcre2(const std::string& pattern);

}  // namespace bonfire::tok
