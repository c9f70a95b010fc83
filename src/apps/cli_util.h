// Small pieces every command shares: errors as PROTOCOL.md's error JSON with
// exit status 1, JSON read from a file or stdin, and the "1,2,3" id lists of
// --tokens.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/json_parse.h"

namespace bonfire {

// Runs fn; an Error (or any exception) is printed as the error JSON on
// stdout and gives 1, else 0.
int guarded(const std::function<void()>& fn);

// CLI::Range for a floating-point option that also refuses NaN (every
// comparison with NaN is false, so CLI::Range lets it through).
CLI::Validator finite_range(double lo, double hi);

// The JSON of FILE, or of stdin when FILE is "-", through core/json_parse's
// bounds (a document nested too deep is refused, never a crash).
nlohmann::json read_json_input(const std::string& file, const JsonLimits& limits = {});

// The most a command reads of a text file (tokenize --file, perplexity
// --file): a corpus of this size is already hours of work, and a path like
// /dev/zero is refused instead of filling memory.
constexpr size_t kMaxTextFile = size_t(1) << 30;

// "1, 2,3" → ids; anything else is bad_graph naming the item.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what);

// The bundled demo model (models/demo, trained by tools/train_demo.py) for
// commands run without --model: $BONFIRE_MODEL if set, else models/demo
// beside or above the executable, else in the source tree it was built
// from. Throws Error naming the places looked at when none exists.
std::string default_model_path();

// The --model value, or the demo model when it is empty (said on stderr).
std::string model_or_default(const std::string& model);

}  // namespace bonfire
