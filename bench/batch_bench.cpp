// Where a batched decode step's time goes (graph/batch.h), per op kind:
//
//   build/batch_bench MODEL.gguf [rows=8] [steps=8] [prompt=16] [ctx]
//
// Prefills `rows` sessions with `prompt` tokens each, then runs `steps`
// batched decode steps of all rows (int8 activations, as generation steps
// run) and one-row steps of the first, and prints ms per step for both and
// the profile of the batched steps (graph/profile.h).
//
//   build/batch_bench MODEL.gguf chunk PROMPT CHUNK
//
// The same for a prompt's later chunk (net/step_scheduler.h cuts a prompt
// read while others decode): CHUNK tokens after PROMPT, four chunks, the
// last three profiled.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "graph/batch.h"
#include "graph/profile.h"
#include "ir/generation.h"
#include "ir/lower.h"
#include "ops/gemm.h"

using namespace bonfire;
using json = nlohmann::json;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [rows=8] [steps=8] [prompt=16]\n", argv[0]);
    return 2;
  }
  const bool chunk_mode = argc > 2 && std::string(argv[2]) == "chunk";
  if (chunk_mode && argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL chunk PROMPT CHUNK\n", argv[0]);
    return 2;
  }
  const int64_t B = chunk_mode ? 1 : argc > 2 ? std::atoi(argv[2]) : 8,
                steps = chunk_mode ? 4 : argc > 3 ? std::atoi(argv[3]) : 8,
                P = argc > 4 && !chunk_mode ? std::atoi(argv[4]) : chunk_mode ? std::atoi(argv[3]) : 16,
                C = chunk_mode ? std::atoi(argv[4]) : 1;
  ir::LocalModel::Options mo;
  mo.ctx = chunk_mode ? P + steps * C + 8 : argc > 5 ? std::atoi(argv[5]) : P + steps + 8;
  auto model = ir::LocalModel::open(argv[1], mo);
  Limits limits;
  const json sample = {{"temperature", 0}, {"seed", 0}, {"topK", 0}, {"topP", 1}};
  // mode "continue": a prompt's later chunk, writing on into the caches.
  auto graph = [&](const std::string& mode, int64_t T) {
    ir::LowerOptions o;
    o.mode = mode == "continue" ? "prefill" : mode;
    o.allocate = mode != "continue";
    o.tokens = T;
    o.ctx = mo.ctx;
    o.logits = false;
    o.sample = sample;
    json call = ir::lower(model->ir(), o, &model->weights());
    call["session"] = "s";
    return Graph::parse(call, {"tokens"}, limits);
  };
  const WeightLookup weights = [&](const std::string& n) { return model->weights().find(n); };
  auto ids = [](int64_t n, int64_t base) {
    Tensor t = Tensor::empty({n});
    for (int64_t i = 0; i < n; ++i) t.f32()[i] = static_cast<float>(100 + (base * 31 + i * 7) % 5000);
    return t;
  };
  Int8Scope int8;
  if (chunk_mode) {
    Session s;
    run_graph(graph("prefill", P), {{"tokens", ids(P, 0)}}, json{{"pos", 0}, {"step", 0}}, weights, &s, limits);
    const Graph g = graph("continue", C);
    double ms = 0;
    for (int64_t k = 0; k < steps; ++k) {
      set_profiling(k > 0);  // the first chunk warms the pools
      const auto t0 = std::chrono::steady_clock::now();
      run_graph(g, {{"tokens", ids(C, k)}}, json{{"pos", P + k * C}, {"step", 0}}, weights, &s, limits);
      if (k > 0) ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    set_profiling(false);
    std::printf("a chunk of %lld tokens after %lld: %.1f ms\n", (long long)C, (long long)P, ms / (steps - 1));
    std::printf("%s", profile_report().c_str());
    return 0;
  }
  std::vector<Session> sessions(B);
  const Graph pre = graph("prefill", P), dec = graph("decode", 1);
  for (int64_t r = 0; r < B; ++r)
    run_graph(pre, {{"tokens", ids(P, r)}}, json{{"pos", 0}, {"step", 0}}, weights, &sessions[r], limits);
  Session solo;
  run_graph(pre, {{"tokens", ids(P, 0)}}, json{{"pos", 0}, {"step", 0}}, weights, &solo, limits);
  double one_ms = 0, batch_ms = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const json bind = {{"pos", P + s}, {"step", s + 1}};
    auto t0 = std::chrono::steady_clock::now();
    run_graph(dec, {{"tokens", ids(1, s)}}, bind, weights, &solo, limits);
    auto t1 = std::chrono::steady_clock::now();
    std::vector<BatchRow> rows;
    for (int64_t r = 0; r < B; ++r) rows.push_back({&sessions[r], bind});
    set_profiling(s > 0);  // the batched steps only; the first one warms the pools
    run_graph_rows(dec, {{"tokens", ids(B, s)}}, rows, weights, limits);
    set_profiling(false);
    auto t2 = std::chrono::steady_clock::now();
    if (s > 0) {
      one_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
      batch_ms += std::chrono::duration<double, std::milli>(t2 - t1).count();
    }
  }
  std::printf("one row: %.1f ms/step; %lld rows batched: %.1f ms/step (%.2f ms per row, %.2fx the tokens/s)\n",
              one_ms / (steps - 1), (long long)B, batch_ms / (steps - 1), batch_ms / (steps - 1) / B,
              B * one_ms / batch_ms);
  std::printf("%s", profile_report().c_str());
  return 0;
}
