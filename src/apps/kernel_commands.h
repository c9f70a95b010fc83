// `bonfire kernel select|run|device`: kernel packages (docs/KERNELS.md) from
// the command line — which variant a package picks for given shapes and
// attributes on a device, and why the others were not picked; running a
// case directory through the package.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace bonfire {

// Adds `kernel` and its subcommands to `app`; returns what to run once
// parsing is done (-1 when `kernel` was not chosen).
std::function<int()> add_kernel_commands(CLI::App& app);

}  // namespace bonfire
