// `bonfire ir from-hf`, `bonfire ir lower` and `bonfire generate`
// (PROTOCOL.md's command line; docs/IR.md).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace bonfire {

// Adds from-hf and lower to the `ir` subcommand and generate to `app`;
// returns what to run once parsing is done (-1 when none was chosen).
std::function<int()> add_ir_commands(CLI::App& app, CLI::App& ir);

}  // namespace bonfire
