#include "model/tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace bonfire::tok {
namespace {

// Allowed range of the second byte for each lead byte (Unicode table 3-7);
// later continuation bytes are always 80..BF.
bool second_ok(unsigned char lead, unsigned char b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

// Number of bytes a lead byte needs in total; 0 when it cannot start a sequence.
int needed(unsigned char c) {
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  if (c < 0xF5) return 4;
  return 0;
}

// Length of the well-formed prefix of the sequence starting at s[i]: equal to
// needed() when it is complete and well formed.
int good_prefix(std::string_view s, size_t i, int need) {
  int k = 1;
  while (k < need && i + k < s.size()) {
    unsigned char b = s[i + k];
    if (k == 1 ? !second_ok(static_cast<unsigned char>(s[i]), b) : (b < 0x80 || b > 0xBF)) break;
    ++k;
  }
  return k;
}

}  // namespace

size_t utf8_invalid_offset(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int need = needed(c);
    if (need == 0 || good_prefix(s, i, need) != need) return i;
    i += need;
  }
  return kValid;
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  unsigned char c = s[i];
  if (c < 0x80) {
    ++i;
    return c;
  }
  int n = utf8_len(c);
  uint32_t cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
  for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}


std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    int need = needed(c);
    int good = need == 0 ? 1 : good_prefix(s, i, need);
    if (need != 0 && good == need) {
      out.append(s.substr(i, need));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += good;
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last three bytes can belong to an unfinished sequence.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    unsigned char c = s[i];
    int need = needed(c);
    if (need < 2) continue;
    int good = good_prefix(s, i, need);
    if (good < need && i + good == s.size()) return i;
  }
  return s.size();
}

bool is_js_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

bool is_unicode_space(uint32_t c) { return c == 0x85 || (c != 0xFEFF && is_js_space(c)); }

std::string_view js_trim_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_js_space(utf8_next(s, j))) break;
    i = j;
  }
  return s.substr(i);
}

std::string_view js_trim_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t j = start;
    if (!is_js_space(utf8_next(s, j))) break;
    end = start;
  }
  return s.substr(0, end);
}

const std::array<uint32_t, 256>& byte_to_char() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

int char_to_byte(uint32_t cp) {
  static const std::array<int16_t, 512> inverse = [] {
    std::array<int16_t, 512> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_to_char()[b]] = static_cast<int16_t>(b);
    return inv;
  }();
  return cp < 512 ? inverse[cp] : -1;
}

namespace {
// Characters that are in NFC whatever surrounds them: canonical combining
// class 0, NFC_Quick_Check Yes, and never the second half of a composition
// (checked against Unicode 14 data). Text made only of these skips utf8proc.
constexpr uint32_t kNfcInert[][2] = {
    {0x0000, 0x02FF}, {0x03A3, 0x0482}, {0x0488, 0x052F}, {0x05D0, 0x05EA}, {0x0620, 0x064A},
    {0x0671, 0x06D5}, {0x0904, 0x0939}, {0x0E01, 0x0E30}, {0x10D0, 0x1248}, {0x1E00, 0x1F15},
    {0x2002, 0x2064}, {0x2190, 0x2328}, {0x2460, 0x2ADB}, {0x3041, 0x3096}, {0x309B, 0x30FF},
    {0x3220, 0xA48C}, {0xAC00, 0xD7A3}, {0xFF01, 0xFFBE}, {0x1F300, 0x1F6D7}, {0x1F900, 0x1FA53}};

bool nfc_inert(uint32_t c) {
  if (c < 0x300) return true;
  for (const auto& r : kNfcInert)
    if (c >= r[0] && c <= r[1]) return true;
  return false;
}
}  // namespace

std::string normalize(std::string_view s, NormForm form) {
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(s);  // every form leaves ASCII alone
  if (form == NormForm::NFC) {
    bool inert = true;
    for (size_t i = 0; inert && i < s.size();) inert = nfc_inert(utf8_next(s, i));
    if (inert) return std::string(s);
  }
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(s);  // input was validated, so this does not happen
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> hold(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

namespace {
bool is_cased_letter(uint32_t cp) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
}  // namespace

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  uint32_t prev = 0;
  while (i < s.size()) {
    uint32_t cp = utf8_next(s, i);
    if (cp == 0x130) {  // İ lowercases to i + combining dot (SpecialCasing.txt)
      out += "i\xCC\x87";
    } else if (cp == 0x3A3) {  // final sigma: after a cased letter, not before one
      size_t j = i;
      bool next_cased = j < s.size() && is_cased_letter(utf8_next(s, j));
      utf8_append(out, is_cased_letter(prev) && !next_cased ? 0x3C2 : 0x3C3);
    } else {
      utf8_append(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
    prev = cp;
  }
  return out;
}

std::string strip_marks(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t cp = utf8_next(s, i);
    auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC && cat != UTF8PROC_CATEGORY_ME)
      out.append(s.substr(start, i - start));
  }
  return out;
}

bool is_letter_or_number(uint32_t cp) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

bool is_punctuation(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
                        (cp >= 0x7B && cp <= 0x7E);
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

std::string replace_all(std::string_view t, std::string_view from, std::string_view to) {
  std::string out;
  size_t prev = 0;
  for (size_t at; (at = t.find(from, prev)) != std::string_view::npos; prev = at + from.size()) {
    out.append(t, prev, at - prev);
    out += to;
  }
  out.append(t, prev, std::string_view::npos);
  return out;
}

}  // namespace bonfire::tok
