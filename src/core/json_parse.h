// The one way JSON from outside is parsed: HTTP bodies, worker frames, model
// configs, tokenizer.json, IR documents, kernel packages, chat templates'
// configs. Bounded in size and nesting depth, because nlohmann's dump() and
// destructors recurse: a body of 100,000 nested '[' would overflow the stack
// long after it parsed. A refusal is Error(BadGraph) (or TooLarge for size)
// that names `what` and the byte offset, and never echoes the input's bytes
// (they may be invalid UTF-8, or huge).
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace bonfire {

struct JsonLimits {
  int max_depth = 64;                    // objects and arrays nested
  size_t max_bytes = size_t(64) << 20;   // the text itself
};

nlohmann::json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits = {});
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& what,
                                          const JsonLimits& limits = {});
// Reads PATH (core/file.h: at most limits.max_bytes; a pipe works too) and
// parses it; `what` is the path.
nlohmann::json parse_json_file(const std::string& path, const JsonLimits& limits = {});
nlohmann::ordered_json parse_ordered_json_file(const std::string& path, const JsonLimits& limits = {});

// nlohmann's own messages, made safe to show: the "[json.exception...]"
// prefix and the "last read: '...'" echo of input bytes removed.
std::string json_error_text(const std::exception& e);

// The integer a JSON number stands for, when it is a whole number of
// magnitude at most `limit`; else nullopt (not a number, a fraction, or too
// large; `limit` at most kMaxExactInteger). Integers read from outside go through here: casting a double
// beyond int64's range is undefined, and sums of unbounded offsets wrap.
std::optional<int64_t> whole_number(const nlohmann::json& v, int64_t limit);
constexpr int64_t kMaxExactInteger = int64_t{1} << 53;  // doubles hold every integer up to it

// dump() that cannot throw on invalid UTF-8 in strings (replaced by U+FFFD).
std::string dump_json(const nlohmann::json& j, int indent = -1);

}  // namespace bonfire
