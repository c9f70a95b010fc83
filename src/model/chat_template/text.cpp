#include "model/chat_template/text.h"

#include <utf8proc.h>

namespace bonfire::chat_template {
namespace {

// Decodes one UTF-8 character at s[i]; malformed bytes decode as themselves
// (one byte each) so nothing is lost on the way through.
char32_t decode(std::string_view s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    *len = 1;
    return c;
  }
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) {
      *len = 1;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  *len = n;
  return cp;
}

bool is_js_space(char32_t c) {
  if (c <= 32) return c == 32 || (c >= 9 && c <= 13);
  return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

template <typename F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n;
    const char32_t cp = decode(s, i, &n);
    if (n == 1 && cp >= 0x80)
      out += s[i];  // a malformed byte passes through
    else
      utf8_append(out, f(cp));
    i += n;
  }
  return out;
}

bool is_word(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

size_t js_space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t n;
  return is_js_space(decode(s, i, &n)) ? n : 0;
}

size_t js_space_before(std::string_view s, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n) {
    const auto c = static_cast<unsigned char>(s[end - n]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t len;
    const char32_t cp = decode(s, end - n, &len);
    return len == n && is_js_space(cp) ? n : 0;
  }
  return 0;
}

std::string js_trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_at(s, i)) i += n;
  return std::string(s.substr(i));
}

std::string js_trim_end(std::string_view s) {
  size_t end = s.size();
  while (size_t n = js_space_before(s, end)) end -= n;
  return std::string(s.substr(0, end));
}

std::string js_trim(std::string_view s) { return js_trim_end(js_trim_start(s)); }

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t n;
    out.push_back(decode(s, i, &n));
    i += n;
  }
  return out;
}


std::string utf8(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t c : cps) utf8_append(out, c);
  return out;
}

size_t utf16_length(std::string_view s) {
  size_t units = 0;
  for (size_t i = 0; i < s.size();) {
    size_t n;
    units += decode(s, i, &n) >= 0x10000 ? 2 : 1;
    i += n;
  }
  return units;
}

bool utf16_at(std::string_view s, long long i, std::string* out) {
  const long long len = static_cast<long long>(utf16_length(s));
  if (i < 0) i += len;
  if (i < 0 || i >= len) return false;
  long long unit = 0;
  for (size_t p = 0; p < s.size();) {
    size_t n;
    const char32_t cp = decode(s, p, &n);
    const long long w = cp >= 0x10000 ? 2 : 1;
    if (i < unit + w) {
      *out = std::string(s.substr(p, n));
      return true;
    }
    unit += w;
    p += n;
  }
  return false;
}

std::string to_upper(std::string_view s) {
  return map_chars(s, [](char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); });
}

std::string to_lower(std::string_view s) {
  return map_chars(s, [](char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); });
}

std::string title_case(std::string_view s) {
  std::string out(s);
  bool prev_word = false;
  for (char& ch : out) {
    const auto c = static_cast<unsigned char>(ch);
    const bool w = c < 0x80 && is_word(c);
    if (w && !prev_word && c >= 'a' && c <= 'z') ch = static_cast<char>(c - 32);
    prev_word = w;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t n;
  const char32_t first = decode(s, 0, &n);
  std::string out;
  utf8_append(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(first))));
  out += s.substr(n);
  return out;
}

}  // namespace bonfire::chat_template
