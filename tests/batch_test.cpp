// Batched calls (graph/batch.h): B sessions' decode steps in one run give
// each row exactly what its own call gives: the same sampled token, the same
// logits bit for bit, the same cache writes.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "graph/batch.h"
#include "ir/generation.h"
#include "ir/lower.h"
#include "ops/gemm.h"
#include "test_models.h"

namespace bonfire {
namespace {

using json = nlohmann::json;

struct Fixture {
  std::unique_ptr<ir::LocalModel> model;
  Limits limits;
  std::map<std::string, Tensor> constants;  // the lowered calls' inline weights (affine shifts, ...)

  Graph graph(const std::string& mode, int64_t tokens, const json& sample) {
    ir::LowerOptions o;
    o.mode = mode;
    o.tokens = tokens;
    o.ctx = 64;
    o.sample = sample;
    json call = ir::lower(model->ir(), o, &model->weights());
    call["session"] = "s";  // the sessions are the caller's; the parser wants one named
    if (call.contains("weights"))
      for (const auto& [name, w] : call["weights"].items()) {
        Tensor t = Tensor::empty(w["shape"].get<std::vector<int64_t>>());
        const auto data = w["data"].get<std::vector<float>>();
        std::copy(data.begin(), data.end(), t.f32());
        constants[name] = t;
      }
    return Graph::parse(call, {"tokens"}, limits);
  }
  WeightLookup weights() const {
    return [this](const std::string& n) -> const Tensor* {
      auto it = constants.find(n);
      return it != constants.end() ? &it->second : model->weights().find(n);
    };
  }
};

Tensor ids(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.f32()[i] = static_cast<float>(v[i]);
  return t;
}

Session copy(const Session& s) {
  Session c;
  for (const auto& [k, t] : s.tensors) c.tensors[k] = to_f32(t);
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && std::memcmp(a.data, b.data, a.numel() * sizeof(float)) == 0;
}

// Three sessions with prompts of different lengths, then one decode step for
// all three batched, against each step alone on a copy of its session.
void expect_rows_equal_solo(Fixture& f, const json& sample) {
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9}, {1, 7, 3, 11, 2}, {1, 4, 4, 8}};
  const std::vector<int32_t> next = {17, 23, 5};
  const size_t B = prompts.size();
  std::vector<Session> batched(B), solo(B);
  for (size_t r = 0; r < B; ++r) {
    const Graph pre = f.graph("prefill", static_cast<int64_t>(prompts[r].size()), sample);
    run_graph(pre, {{"tokens", ids(prompts[r])}}, json{{"pos", 0}, {"step", 0}}, f.weights(), &batched[r], f.limits);
    solo[r] = copy(batched[r]);
  }
  const Graph dec = f.graph("decode", 1, sample);
  std::vector<BatchRow> rows;
  for (size_t r = 0; r < B; ++r)
    rows.push_back({&batched[r], json{{"pos", prompts[r].size()}, {"step", 1}}});
  const RunResult all = run_graph_rows(dec, {{"tokens", ids(next)}}, rows, f.weights(), f.limits);
  // Every product ran once for all rows (the weights were read once).
  int64_t products = 0;
  for (const auto& n : dec.nodes) products += n.op->name == "matmul";
  EXPECT_GE(all.nodes_once, products);
  ASSERT_TRUE(all.outputs.count("logits"));
  ASSERT_TRUE(all.outputs.count("token"));
  const Tensor& logits = all.outputs.at("logits");
  ASSERT_EQ(logits.shape[0], static_cast<int64_t>(B));
  const int64_t vocab = logits.shape.back();
  for (size_t r = 0; r < B; ++r) {
    const RunResult one = run_graph(dec, {{"tokens", ids({next[r]})}}, rows[r].bind, f.weights(), &solo[r], f.limits);
    EXPECT_EQ(all.outputs.at("token").f32()[r], one.outputs.at("token").f32()[0]) << "row " << r;
    EXPECT_EQ(std::memcmp(logits.f32() + r * vocab, one.outputs.at("logits").f32(), vocab * sizeof(float)), 0)
        << "row " << r << ": the logits differ from the row's own call";
    ASSERT_EQ(batched[r].tensors.size(), solo[r].tensors.size());
    for (const auto& [k, t] : solo[r].tensors) EXPECT_TRUE(same_bits(batched[r].tensors.at(k), t)) << "row " << r << " " << k;
  }
}

TEST(BatchedCall, DemoRowsEqualTheirOwnCalls) {
  Fixture f;
  f.model = ir::LocalModel::open(std::string(BONFIRE_SOURCE_DIR) + "/models/demo", {});
  expect_rows_equal_solo(f, json{{"temperature", 0}, {"seed", 0}});
  // Seeded sampling with a repetition penalty: a history per session.
  expect_rows_equal_solo(f, json{{"temperature", 0.9}, {"seed", 7}, {"topP", 0.9}, {"repetitionPenalty", 1.1},
                                 {"penaltyWindow", 16}});
}

// q8_0 weights with int8 activations: the integer dot path per row.
TEST(BatchedCall, Q8RowsEqualTheirOwnCallsWithInt8Activations) {
  const auto dir = testing::test_model("llama", "f32,q8_0");
  ASSERT_FALSE(dir.empty());
  Fixture f;
  f.model = ir::LocalModel::open((dir / "model-q8_0.gguf").string(), {});
  Int8Scope int8;
  expect_rows_equal_solo(f, json{{"temperature", 0}, {"seed", 0}});
}

// State that is not a plain KV cache, advanced in place by per-row nodes:
// Gemma 2's sliding window as a ring (window 4, so the prompts wrap it),
// LFM2's convolution rows, Jamba's Mamba and Mamba-2's conv and scan states.
TEST(BatchedCall, RingsAndRecurrentStatesStayPerRow) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> models = {
      {"gemma2", {"--sliding-window", "4"}}, {"lfm2", {}}, {"jamba", {}}, {"mamba2", {}}};
  for (const auto& [family, args] : models) {
    SCOPED_TRACE(family);
    const auto dir = testing::test_model(family, "f32", args);
    ASSERT_FALSE(dir.empty()) << "could not write the " << family << " test model";
    Fixture f;
    ir::LocalModel::Options o;
    o.ctx = 64;
    f.model = ir::LocalModel::open((dir / "hf").string(), o);
    expect_rows_equal_solo(f, json{{"temperature", 0}, {"seed", 0}});
  }
}

TEST(BatchedCall, BadRowsAreRefusedNamingTheRow) {
  Fixture f;
  f.model = ir::LocalModel::open(std::string(BONFIRE_SOURCE_DIR) + "/models/demo", {});
  const Graph dec = f.graph("decode", 1, json{{"temperature", 0}});
  Session a, b;
  const Graph pre = f.graph("prefill", 2, json{{"temperature", 0}});
  run_graph(pre, {{"tokens", ids({1, 2})}}, json{{"pos", 0}, {"step", 0}}, f.weights(), &a, f.limits);
  const json bind = {{"pos", 2}, {"step", 1}};
  // The same session twice.
  EXPECT_THROW(run_graph_rows(dec, {{"tokens", ids({3, 4})}}, {{&a, bind}, {&a, bind}}, f.weights(), f.limits), Error);
  // Inputs that do not stack the rows.
  EXPECT_THROW(run_graph_rows(dec, {{"tokens", ids({3, 4, 5})}}, {{&a, bind}, {&b, bind}}, f.weights(), f.limits),
               Error);
  // A row whose session holds no caches: named, and nothing written to the other.
  const Session before = copy(a);
  try {
    run_graph_rows(dec, {{"tokens", ids({3, 4})}}, {{&a, bind}, {&b, bind}}, f.weights(), f.limits);
    ADD_FAILURE() << "a session without caches was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::SessionNotFound);
    EXPECT_NE(std::string(e.what()).find("row 1:"), std::string::npos) << e.what();
  }
  for (const auto& [k, t] : before.tensors) EXPECT_TRUE(same_bits(a.tensors.at(k), t)) << k;
}

}  // namespace
}  // namespace bonfire
