// QMoE (spec/kernels/qmoe.json) on the CPU at the sizes of real mixtures of
// experts, beside ONNX Runtime on the same cases in the same run:
// Qwen1.5-MoE-A2.7B's routed experts (hidden 2048, intermediate 1408, 60
// experts, top 4) and OLMoE-1B-7B's (2048, 1024, 64, top 8), 4-bit block 32,
// interleaved SwiGLU, at T = 1 (decode) and T = 512 (prefill).
//
//   build/qmoe_bench [--threads 2] [--reps N] [--cases DIR] [--no-ort] [--only SUBSTRING]
//
// The cases are the ones `scripts/qmoe/gen_cases.py --bench DIR` writes
// (bench_{qwen,olmoe}_t{1,512}: inputs, ORT's output, model.onnx and
// model_const.onnx); without --cases they are written to a temporary folder
// when the script and ONNX Runtime (refs/ort) are there, else made here with
// the same shapes and bonfire runs alone. ORT's time comes from
// scripts/qmoe/bench_ort.mjs with the same thread count, in both of its
// modes: weights as graph inputs (`inputs`, the path the reference outputs
// come from) and as initializers (`const`, as in a real model).
//
// "GB/s" is the effective weight bandwidth: the packed weights and scales of
// the experts the call actually computes (every expert some token routes to
// with a weight > 1e-8), divided by the time. Times are the median of the
// repetitions after a warm-up; the whole op call is timed as a model's QMoE
// layer makes it through kernels::PlanCache: the check, the variant and the
// plan are made on the warm-up call and kept; the timed calls check the
// buffers, fill the output and intermediates with zeros and run the passes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/bandwidth.h"
#include "core/threads.h"
#include "kernels/case_dir.h"
#include "kernels/device.h"
#include "kernels/package.h"
#include "kernels/runtime.h"

using namespace bonfire;
using namespace bonfire::kernels;
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  std::string model;
  int64_t hidden, inter, experts, k, tokens;
};

const std::vector<Shape> kShapes = {{"qwen", 2048, 1408, 60, 4, 1},
                                    {"qwen", 2048, 1408, 60, 4, 512},
                                    {"olmoe", 2048, 1024, 64, 8, 1},
                                    {"olmoe", 2048, 1024, 64, 8, 512}};

std::string case_name(const Shape& s) { return "bench_" + s.model + "_t" + std::to_string(s.tokens); }

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a command, returns its standard output ("" when it fails).
std::string run(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return "";
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p.get())) out.append(buf, n);
  return out;
}

// A case made here when no case folder is at hand: the same shapes, random
// weights, scales and tokens (4-bit, block 32, SwiGLU).
CaseDir synthesize(const Shape& s) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0, 1);
  std::uniform_real_distribution<float> sc(0.002f, 0.02f);
  CaseDir c;
  c.op = "QMoE";
  c.attrs = {{"k", s.k}, {"expert_weight_bits", 4}, {"block_size", 32}, {"activation_type", "swiglu"},
             {"swiglu_fusion", 1}};
  auto f32 = [&](std::vector<int64_t> shape, const std::function<float()>& gen) {
    Buffer b{"float32", std::move(shape), {}};
    b.bytes.resize(b.numel() * 4);
    for (int64_t i = 0; i < b.numel(); ++i) b.as<float>()[i] = gen();
    return b;
  };
  auto u8 = [&](std::vector<int64_t> shape) {
    Buffer b{"uint8", std::move(shape), {}};
    b.bytes.resize(b.numel());
    for (auto& v : b.bytes) v = (uint8_t)(rng() & 255);
    return b;
  };
  c.inputs["input"] = f32({s.tokens, s.hidden}, [&] { return n(rng); });
  c.inputs["router_probs"] = f32({s.tokens, s.experts}, [&] { return 2 * n(rng); });
  c.inputs["fc1_experts_weights"] = u8({s.experts, 2 * s.inter, s.hidden / 2});
  c.inputs["fc1_scales"] = f32({s.experts, 2 * s.inter, s.hidden / 32}, [&] { return sc(rng); });
  c.inputs["fc2_experts_weights"] = u8({s.experts, s.hidden, s.inter / 2});
  c.inputs["fc2_scales"] = f32({s.experts, s.hidden, s.inter / 32}, [&] { return sc(rng); });
  return c;
}

// Bytes of the weights and scales of the experts the call computes.
int64_t weight_bytes(const CaseDir& c) {
  const Buffer& logits = c.inputs.at("router_probs");
  const int64_t T = logits.shape[0], E = logits.shape[1], K = c.attrs.value("k", 1);
  std::vector<char> used(E, 0);
  std::vector<std::pair<float, int64_t>> sorted(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) sorted[e] = {logits.as<float>()[t * E + e], e};
    std::partial_sort(sorted.begin(), sorted.begin() + K, sorted.end(), std::greater<>());
    float sum = 0;
    std::vector<float> ex(K);
    for (int64_t j = 0; j < K; ++j) sum += ex[j] = std::exp(sorted[j].first - sorted[0].first);
    for (int64_t j = 0; j < K; ++j)
      if (ex[j] * (1.0f / sum) > 1e-8f) used[sorted[j].second] = 1;
  }
  int64_t per_expert = 0;
  for (const char* role : {"fc1_experts_weights", "fc1_scales", "fc2_experts_weights", "fc2_scales"})
    per_expert += (int64_t)c.inputs.at(role).bytes.size() / E;
  return per_expert * std::count(used.begin(), used.end(), 1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 0;
  std::string cases, only;
  bool ort = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--cases" && i + 1 < argc) cases = argv[++i];
    else if (a == "--no-ort") ort = false;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: qmoe_bench [--threads N] [--reps N] [--cases DIR] [--no-ort] [--only SUBSTRING]\n");
      return 2;
    }
  }
  set_num_threads(threads);
  const fs::path src = BONFIRE_SOURCE_DIR;
  const fs::path ort_script = src / "scripts" / "qmoe" / "bench_ort.mjs";
  const fs::path gen_script = src / "scripts" / "qmoe" / "gen_cases.py";
  const bool have_ort = ort && fs::exists(ort_script) && fs::exists(src / "refs" / "ort" / "node_modules");
  if (cases.empty() && have_ort && fs::exists(gen_script)) {
    cases = (fs::temp_directory_path() / "bonfire-qmoe-bench").string();
    if (!fs::exists(fs::path(cases) / "bench_olmoe_t512" / "model_const.onnx")) {
      std::printf("writing the benchmark cases into %s (gen_cases.py --bench; runs ORT once per case)\n",
                  cases.c_str());
      std::fflush(stdout);
      const int rc = std::system(("/usr/bin/python3 " + shell_quote(gen_script.string()) + " --bench " +
                                  shell_quote(cases) + " > /dev/null")
                                     .c_str());
      if (rc != 0) {
        std::printf("gen_cases.py --bench failed; bonfire alone on cases made here\n");
        cases.clear();
      }
    }
  }

  const Package pkg = load_package((src / "spec" / "kernels" / "qmoe.json").string());
  const Device& cpu = cpu_device();
  std::printf("QMoE, %d threads; ms: median of the repetitions; GB/s: weights+scales of the computed experts / ms\n",
              num_threads());
  // Decode streams the routed experts once: the machine's read bandwidth is
  // its ceiling (measured here, as this machine's swings from run to run).
  std::printf("read bandwidth %.1f GB/s\n", measure_read_bandwidth() / 1e9);
  std::printf("%-16s %-22s %9s %9s %8s | %11s %8s %11s %8s | %7s\n", "case", "bonfire variant", "weightMB",
              "ms", "GB/s", "ORT inputs", "GB/s", "ORT const", "GB/s", "speedup");
  for (const Shape& s : kShapes) {
    if (case_name(s).find(only) == std::string::npos) continue;
    const fs::path dir = cases.empty() ? fs::path() : fs::path(cases) / case_name(s);
    const bool from_dir = !dir.empty() && fs::exists(dir / "case.json");
    CaseDir c = from_dir ? load_case(dir.string()) : synthesize(s);
    const int64_t bytes = weight_bytes(c);
    const int n = reps > 0 ? reps : (s.tokens == 1 ? 50 : 5);
    std::map<std::string, Buffer> buffers = c.inputs;
    PlanCache plans(pkg, cpu);
    RunReport r = plans.run(c.attrs, buffers);  // warm-up
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      r = plans.run(c.attrs, buffers);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    const double bonfire_ms = median(ms);
    if (from_dir && c.expected_outputs.count("output")) {  // the output must still be ORT's
      const Buffer& want = c.expected_outputs.at("output");
      double scale = 0;
      for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, (double)std::fabs(want.as<float>()[i]));
      const Comparison cmp = compare(buffers.at("output"), want, "output");
      if (cmp.nan_mismatches || !(cmp.max_abs <= 1e-5 * scale))
        std::printf("  (warning: %s differs from ORT's output: max abs %.3g, output scale %.3g)\n",
                    case_name(s).c_str(), cmp.max_abs, scale);
    }
    std::string ort_cols = "          -        -           -        - |       -";
    if (from_dir && have_ort) {
      double t_in = NAN, t_const = NAN;
      for (const char* mode : {"inputs", "const"}) {
        const std::string cmd = "node " + shell_quote(ort_script.string()) + " --case " + shell_quote(dir.string()) +
                                " --threads " + std::to_string(threads) + " --mode " + mode + " --reps " +
                                std::to_string(n) + " 2>/dev/null";
        const std::string out = run(cmd);
        try {
          const json j = json::parse(out);
          (std::string(mode) == "inputs" ? t_in : t_const) = j.at("ms_median").get<double>();
        } catch (...) {
        }
      }
      char buf[160];
      const auto gbps = [&](double t) { return std::isnan(t) ? NAN : bytes / (t * 1e6); };
      std::snprintf(buf, sizeof buf, "%11.2f %8.1f %11.2f %8.1f | %6.2fx", t_in, gbps(t_in), t_const, gbps(t_const),
                    std::min(std::isnan(t_in) ? INFINITY : t_in, std::isnan(t_const) ? INFINITY : t_const) /
                        bonfire_ms);
      ort_cols = buf;
    }
    std::printf("%-16s %-22s %9.1f %9.2f %8.1f | %s\n", (case_name(s) + (from_dir ? "" : "*")).c_str(),
                r.variant.c_str(), bytes / 1e6, bonfire_ms, bytes / (bonfire_ms * 1e6), ort_cols.c_str());
    std::fflush(stdout);
  }
  std::printf("speedup: ORT's faster mode / bonfire (above 1: bonfire is faster)%s\n",
              cases.empty() ? "; * = made here, no ORT" : "");
  return 0;
}
