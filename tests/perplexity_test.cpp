// `bonfire perplexity`: the windowing protocol (ir/perplexity.h), and the
// demo model's figure against the PyTorch evaluation tools/train_demo.py
// recorded in models/demo/eval.json.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file.h"
#include "ir/perplexity.h"
#include "test_models.h"

namespace bonfire {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::unique_ptr<ir::LocalModel> tiny_llama() {
  const fs::path dir = testing::test_model("llama", "f32");
  if (dir.empty()) return nullptr;
  ir::LocalModel::Options o;
  o.ctx = 64;
  return ir::LocalModel::open((dir / "hf").string(), o);
}

// -log softmax(logits[row])[next], the definition written out once more.
double nll(const std::vector<float>& logits, int64_t vocab, int64_t row, int32_t next) {
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[row * vocab + v]));
  return std::log(sum) - logits[row * vocab + next];
}

TEST(Perplexity, WindowsStartFreshAndScoreAllButTheirFirstToken) {
  auto model = tiny_llama();
  ASSERT_TRUE(model);
  const int64_t vocab = model->ir()["model"]["vocab"].get<int64_t>();
  std::vector<int32_t> tokens;
  for (int i = 0; i < 11; ++i) tokens.push_back((i * 37 + 5) % static_cast<int>(vocab));

  // 11 tokens in windows of 4: [0,4) [4,8) [8,11) → 3 + 3 + 2 predictions.
  const ir::PerplexityResult r = ir::perplexity(*model, tokens, 4);
  EXPECT_EQ(r.windows, 3);
  EXPECT_EQ(r.predicted, 8);
  double expected = 0;
  for (int64_t begin = 0; begin < 11; begin += 4) {
    const std::vector<int32_t> w(tokens.begin() + begin, tokens.begin() + std::min<int64_t>(begin + 4, 11));
    const std::vector<float> logits = model->all_logits(w);
    for (size_t i = 0; i + 1 < w.size(); ++i) expected += nll(logits, vocab, static_cast<int64_t>(i), w[i + 1]);
  }
  EXPECT_NEAR(r.nll_sum, expected, 1e-6 * expected);
  EXPECT_NEAR(r.perplexity, std::exp(expected / 8), 1e-6 * r.perplexity);

  // A last window of one token predicts nothing and is dropped.
  tokens.resize(9);
  const ir::PerplexityResult short_tail = ir::perplexity(*model, tokens, 4);
  EXPECT_EQ(short_tail.windows, 2);
  EXPECT_EQ(short_tail.predicted, 6);
}

TEST(Perplexity, RefusesWindowsOutsideTheContextAndEmptyTexts) {
  auto model = tiny_llama();
  ASSERT_TRUE(model);
  const std::vector<int32_t> tokens = {1, 2, 3};
  EXPECT_THROW(ir::perplexity(*model, tokens, 1), Error);
  EXPECT_THROW(ir::perplexity(*model, tokens, model->ctx() + 1), Error);
  EXPECT_THROW(ir::perplexity(*model, {7}, 4), Error);
}

// The figure in the README: bonfire's lowered graphs against PyTorch on the
// held-out split, same tokens, same windows. 1e-3 relative is the issue's
// bar; f32 on both sides over ~10k tokens lands far inside it.
TEST(Perplexity, DemoModelAgreesWithPyTorchOnTheHeldOutSplit) {
  const fs::path demo = fs::path(BONFIRE_SOURCE_DIR) / "models" / "demo";
  ASSERT_TRUE(fs::exists(demo / "eval.json")) << "models/demo is committed; tools/train_demo.py writes it";
  const json eval = json::parse(read_file((demo / "eval.json").string()));
  ir::LocalModel::Options o;
  o.ctx = eval.at("ctx").get<int64_t>();
  auto model = ir::LocalModel::open(demo.string(), o);
  const std::string text = read_file((demo / eval.at("file").get<std::string>()).string());
  const std::vector<int32_t> tokens = ir::perplexity_tokens(*model, text);
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), eval.at("tokens").get<int64_t>()) << "the tokenizers disagree";
  const ir::PerplexityResult r = ir::perplexity(*model, tokens, o.ctx);
  EXPECT_EQ(r.predicted, eval.at("predicted").get<int64_t>());
  const double want = eval.at("perplexity").get<double>();
  EXPECT_LT(std::fabs(r.perplexity - want) / want, 1e-3) << "bonfire " << r.perplexity << ", PyTorch " << want;
}

}  // namespace
}  // namespace bonfire
