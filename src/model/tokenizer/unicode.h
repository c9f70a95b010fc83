// UTF-8 helpers the tokenizer needs: validation, code point iteration, lossy
// decoding of byte strings, GPT-2's byte<->char alphabet, Unicode
// normalization (utf8proc) and the whitespace set of JavaScript, which the
// reference tokenizer (transformers.js) uses wherever HF writes \s or trim().
#pragma once
#include "core/utf8.h"
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bonfire::tok {

constexpr size_t kValid = static_cast<size_t>(-1);

// Offset of the first byte that does not start a well-formed UTF-8 sequence
// (overlongs, surrogates and code points past U+10FFFF are ill-formed), or
// kValid.
size_t utf8_invalid_offset(std::string_view s);

// Length of the sequence a lead byte starts (1..4); 1 for stray bytes.
inline int utf8_len(unsigned char c) {
  return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1;
}

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i.
uint32_t utf8_next(std::string_view s, size_t& i);

// Replaces each maximal ill-formed subsequence with U+FFFD, exactly as the
// WHATWG decoder (and Rust's from_utf8_lossy) does.
std::string utf8_lossy(std::string_view bytes);

// Length of the longest prefix that does not end inside a sequence which more
// bytes could still complete.
size_t utf8_complete_prefix(std::string_view bytes);

// JavaScript's \s: WhiteSpace and LineTerminator (includes U+FEFF, not U+0085).
bool is_js_space(uint32_t cp);
std::string_view js_trim_start(std::string_view s);
std::string_view js_trim_end(std::string_view s);

// GPT-2's reversible map of the 256 byte values to printable code points.
const std::array<uint32_t, 256>& byte_to_char();
int char_to_byte(uint32_t cp);  // -1 when cp is not in the alphabet

enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormForm form);
std::string to_lower(std::string_view s);  // full lowercase, final sigma included
std::string strip_marks(std::string_view s);  // drops \p{M}

bool is_letter_or_number(uint32_t cp);  // \p{L} or \p{N}
bool is_punctuation(uint32_t cp);       // ASCII punctuation or \p{P}
bool is_unicode_space(uint32_t cp);     // the White_Space property

// Every occurrence of `from` (non-empty) in t replaced by `to`, left to right.
std::string replace_all(std::string_view t, std::string_view from, std::string_view to);

}  // namespace bonfire::tok
