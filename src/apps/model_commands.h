// Commands over model files: tokenize, detokenize, template (PROTOCOL.md's
// command line). Each prints its result on stdout, or an error JSON on
// stdout with exit status 1.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace bonfire {

// Adds the subcommands to `app`; returns what to run once parsing is done
// (nothing when none of them was chosen).
std::function<int()> add_model_commands(CLI::App& app);

}  // namespace bonfire
