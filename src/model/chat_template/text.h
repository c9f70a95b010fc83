// String helpers with JavaScript's meaning, on UTF-8: which characters are
// whitespace (String.prototype.trim and the template lexer agree on the set),
// lengths and indices in UTF-16 units, and case mapping.
#pragma once
#include "core/utf8.h"
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bonfire::chat_template {

// Byte length of the JavaScript whitespace or line terminator starting at s[i], or 0.
size_t js_space_at(std::string_view s, size_t i);
// Byte length of the JavaScript whitespace ending just before s[end], or 0.
size_t js_space_before(std::string_view s, size_t end);

std::string js_trim(std::string_view s);
std::string js_trim_start(std::string_view s);
std::string js_trim_end(std::string_view s);

std::vector<char32_t> code_points(std::string_view s);
std::string utf8(const std::vector<char32_t>& cps);

// JavaScript's .length.
size_t utf16_length(std::string_view s);
// JavaScript's str.at(i) (negative counts from the end); false when out of range.
// A character outside the BMP is two units; either half yields the whole character.
bool utf16_at(std::string_view s, long long i, std::string* out);

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
// /\b\w/g to upper case: ASCII word characters after a non-word character.
std::string title_case(std::string_view s);
// First character upper case, the rest unchanged.
std::string capitalize(std::string_view s);

}  // namespace bonfire::chat_template
