// `bonfire bench generate` (see bench_generate.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace bonfire {

struct BenchGenerateOptions {
  std::string model;
  int64_t prefill = 128, decode = 64;
  int reps = 2;
  bool reference = true;
  bool json = false;
  bool network = false;           // also through bonfire serve + a worker over loopback
  bool busy = false;              // network decode again beside a busy process, plain and --background
  std::string reference_script;  // default: scripts/bench_llama_cpp.py beside the build dir
};

int bench_generate(const BenchGenerateOptions& options);

}  // namespace bonfire
