// The volunteer's controls over the compute a command uses: --threads,
// --background and --exact (f32 activations everywhere). Accepted before the subcommand (`bonfire --threads 2 worker`)
// and on each command that computes (`bonfire worker --threads 2`); applied
// once after parsing, before any work starts.
#pragma once
#include <CLI/CLI.hpp>

namespace bonfire {

// Adds --threads and --exact (and --background when `background` is true)
// to `cmd`.
void add_compute_options(CLI::App& cmd, bool background);

// Adds --int8-everywhere: int8 activations for prefill too (to measure their
// accuracy; see ops/gemm.h).
void add_int8_everywhere_option(CLI::App& cmd);

// Sizes the thread pool and sets background mode from what was given.
// Warnings (more threads than cores, background mode unavailable) go to
// stderr; a count below 1 prints its message and returns false.
bool apply_compute_options();

}  // namespace bonfire
