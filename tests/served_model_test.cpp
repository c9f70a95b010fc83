// The coordinator's copy of a model (net/served_model.h) lowers the steps
// its workers run; it must not hold the weights a second time. Before this
// test, `bonfire serve` with its own worker repacked and paged in every
// weight twice (2.4 GB anonymous memory for the 1.1B q8_0 bench model
// instead of 1.3) and ran a throwaway generation on the coordinator.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/generation.h"
#include "ir/lower.h"
#include "net/served_model.h"
#include "ops/int8_gemm.h"
#include "test_models.h"

namespace bonfire {
namespace {

int repacked_count(const WeightStore& w) {
  int n = 0;
  for (const std::string& name : w.names()) n += w.find(name)->repacked != nullptr;
  return n;
}

nlohmann::json lowered(const ir::LocalModel& m, const std::string& mode, int64_t tokens) {
  ir::LowerOptions o;
  o.mode = mode;
  o.tokens = tokens;
  o.ctx = m.ctx();
  return ir::lower(m.ir(), o, &m.weights());
}

// One family's test model (its q8_0 GGUF, or with `hf` its Hugging Face
// folder), opened to run and opened for lowering only.
struct BothCopies {
  std::string file;
  std::unique_ptr<ir::LocalModel> runner, lowering;
};

BothCopies open_both(const std::string& family, bool hf = false) {
  const auto dir = testing::test_model(family, "f32,q8_0");
  if (dir.empty()) return {};
  BothCopies b;
  b.file = (dir / (hf ? "hf" : "model-q8_0.gguf")).string();
  ir::LocalModel::Options options;
  options.ctx = 64;
  b.runner = ir::LocalModel::open(b.file, options);
  options.compute = false;
  b.lowering = ir::LocalModel::open(b.file, options);
  return b;
}

// The same prefill and decode graphs, so workers run what they would have
// run had the coordinator's copy loaded everything.
void expect_same_graphs(const BothCopies& b) {
  for (const auto& [mode, tokens] : std::vector<std::pair<std::string, int64_t>>{{"prefill", 5}, {"decode", 1}})
    EXPECT_EQ(lowered(*b.lowering, mode, tokens), lowered(*b.runner, mode, tokens)) << mode;
}

TEST(ServedModel, LowersTheWorkersGraphsWithoutLoadingTheWeightsToRun) {
  const BothCopies both = open_both("llama");
  ASSERT_TRUE(both.runner) << "scripts/write_test_model.py failed";
  const auto& runner = both.runner;
  const auto& lowering = both.lowering;

  // The runner's q8_0 matrices get panels where the CPU has the int8 tiles;
  // the lowering-only copy has none, whatever the CPU.
  if (simd::int8_gemm_available(DType::Q8_0, 32)) {
    EXPECT_GT(repacked_count(runner->weights()), 0);
  }
  EXPECT_EQ(repacked_count(lowering->weights()), 0);

  // The GGUF's q and k rows are in ggml's rope order: the runner holds
  // copies moved back to Hugging Face's, the lowering-only copy views of the
  // file (v needs no move: a view in both), with the same shapes.
  const std::string layer = "model.layers.0.self_attn.";
  for (const char* moved : {"q_proj.weight", "k_proj.weight"}) {
    const Tensor* in_runner = runner->weights().find(layer + moved);
    const Tensor* in_lowering = lowering->weights().find(layer + moved);
    ASSERT_TRUE(in_runner && in_lowering) << moved;
    EXPECT_EQ(in_lowering->shape, in_runner->shape) << moved;
    EXPECT_EQ(in_lowering->dtype, in_runner->dtype) << moved;
    EXPECT_EQ(in_lowering->owner, lowering->weights().find(layer + "v_proj.weight")->owner) << moved;
    EXPECT_NE(in_runner->owner, runner->weights().find(layer + "v_proj.weight")->owner) << moved;
  }

  expect_same_graphs(both);

  ir::GenerateRequest r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 2;
  try {
    lowering->generate(r);
    ADD_FAILURE() << "a lowering-only model generated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lowering only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lowering->all_logits({1, 2, 3}), Error);
  EXPECT_EQ(runner->generate(r).tokens.size(), 2u);

  net::ServeModelOptions so;
  so.ctx = 64;
  const auto served = net::ServedModel::open(both.file, so);
  EXPECT_EQ(repacked_count(served->local().weights()), 0);
  const WeightStore& coordinator = served->local().weights();
  EXPECT_EQ(coordinator.find(layer + "q_proj.weight")->owner, coordinator.find(layer + "v_proj.weight")->owner);
  EXPECT_GT(served->total_bytes(), 0);
}

// `name`, which the runner builds in f32 from the file (its values not
// all zero), is in the lowering-only copy as zeros of the same shape and
// dtype, whose pages are never touched; the graphs are the same.
void expect_placeholder(const BothCopies& both, const std::string& name) {
  const Tensor* built = both.runner->weights().find(name);
  const Tensor* placeholder = both.lowering->weights().find(name);
  ASSERT_TRUE(built && placeholder) << name;
  ASSERT_EQ(placeholder->shape, built->shape) << name;
  ASSERT_EQ(placeholder->dtype, built->dtype) << name;
  bool built_nonzero = false, placeholder_zero = true;
  for (int64_t i = 0; i < built->numel(); ++i) {
    built_nonzero = built_nonzero || built->f32()[i] != 0;
    placeholder_zero = placeholder_zero && placeholder->f32()[i] == 0;
  }
  EXPECT_TRUE(built_nonzero) << name;
  EXPECT_TRUE(placeholder_zero) << name;
  expect_same_graphs(both);
}

// DeepSeek's GGUF splits kv_b_proj into attn_k_b and attn_v_b; the runner
// joins them back.
TEST(ServedModel, LowersDeepSeekWithoutJoiningItsKvB) {
  const BothCopies both = open_both("deepseek_v3");
  ASSERT_TRUE(both.runner) << "scripts/write_test_model.py failed";
  expect_placeholder(both, "model.layers.0.self_attn.kv_b_proj.weight");
}

// GPT-2's Hugging Face weights are Conv1D ([in, out]); the runner holds
// them transposed.
TEST(ServedModel, LowersGpt2FromItsFolderWithoutTransposing) {
  const BothCopies both = open_both("gpt2", /*hf=*/true);
  ASSERT_TRUE(both.runner) << "scripts/write_test_model.py failed";
  expect_placeholder(both, "transformer.h.0.attn.c_attn.weight");
}

}  // namespace
}  // namespace bonfire
