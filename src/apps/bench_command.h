// `bonfire bench ...`: each benchmark prints bonfire's figure beside its
// reference's, measured in the same run.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace bonfire {

// Adds `bench load` (open a large safetensors file; the reference is reading
// it through once). Returns what to run, or a function returning -1.
std::function<int()> add_bench_commands(CLI::App& app);

}  // namespace bonfire
