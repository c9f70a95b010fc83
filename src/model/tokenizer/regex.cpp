#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "model/tokenizer/unicode.h"

namespace bonfire::tok {
namespace {

// JavaScript's \s, as the body of a character class.
constexpr const char* kJsSpace = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
                                 "\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

// Per-thread match state: a match block and a JIT stack large enough for
// long whitespace runs.
struct MatchState {
  pcre2_match_data* md = pcre2_match_data_create(16, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* ctx = [this] {
    pcre2_match_context* c = pcre2_match_context_create(nullptr);
    if (stack) pcre2_jit_stack_assign(c, nullptr, stack);
    return c;
  }();
  ~MatchState() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

std::string js_to_pcre2(const std::string& in) {
  std::string p = in;
  // The reference rewrites this group because JS has no inline flags; a
  // caseless PCRE2 match would also accept U+017F for 's', so do the same.
  const std::string ci = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
  for (size_t at; (at = p.find(ci)) != std::string::npos;)
    p.replace(at, ci.size(), "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))");

  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      switch (e) {
        case 's': out += in_class ? std::string(kJsSpace) : "[" + std::string(kJsSpace) + "]"; break;
        case 'S': out += in_class ? std::string("\\S") : "[^" + std::string(kJsSpace) + "]"; break;
        case 'd': out += in_class ? "0-9" : "[0-9]"; break;
        case 'D': out += in_class ? "\\D" : "[^0-9]"; break;
        case 'w': out += in_class ? "A-Za-z0-9_" : "[A-Za-z0-9_]"; break;
        case 'W': out += in_class ? "\\W" : "[^A-Za-z0-9_]"; break;
        case 'u':
          if (i + 1 < p.size() && p[i + 1] == '{') {  // \u{1F600}
            size_t close = p.find('}', i);
            out += "\\x" + p.substr(i + 1, close - i);
            i = close;
          } else {  // \u00e9
            out += "\\x{" + p.substr(i + 1, 4) + "}";
            i += 4;
          }
          break;
        default: out += '\\'; out += e;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out += c;
    } else if (c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
    } else if (c == '.') {
      out += "[^\\n\\r\\x{2028}\\x{2029}]";
    } else {
      out += c;
    }
  }
  return out;
}

Regex::Regex(const std::string& pattern, const std::string& where, bool js_dialect) : pattern_(pattern) {
  std::string src = js_dialect ? js_to_pcre2(pattern) : pattern;
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(src.data()), src.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    bad_graph(where + ": bad regex '" + pattern + "' at offset " + std::to_string(err_off) + ": " +
              reinterpret_cast<const char*>(msg));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchState& st = match_state();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), pos, 0, st.md, st.ctx)
                  : pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.md, st.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(ErrorCode::Internal, "tokenizer regex '" + pattern_ + "': " + reinterpret_cast<const char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.push_back({b, e});
      pos = e;
    } else {  // empty match: JavaScript moves on by one code point
      if (b >= text.size()) break;
      pos = b + utf8_len(static_cast<unsigned char>(text[b]));
    }
  }
}

std::string Regex::replace_all(std::string_view text, std::string_view content) const {
  std::vector<Span> spans;
  find_all(text, spans);
  if (spans.empty()) return std::string(text);
  std::string out;
  size_t prev = 0;
  for (const Span& s : spans) {
    out.append(text.substr(prev, s.begin - prev));
    out.append(content);
    prev = s.end;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace bonfire::tok
