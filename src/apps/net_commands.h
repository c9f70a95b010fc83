// `bonfire serve` and `bonfire worker` (PROTOCOL.md's command line,
// docs/NETWORK.md).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace bonfire {

// Adds the subcommands to `app`; returns what to run once parsing is done
// (-1 when none of them was chosen).
std::function<int()> add_net_commands(CLI::App& app);

}  // namespace bonfire
