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
#include "ops/gemm.h"
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

// The demo model as q8_0 and q4_0 GGUF files (scripts/write_test_model.py
// --from-hf, laid out as llama.cpp's converter and quantizer write them),
// written once into the build tree.
fs::path demo_gguf(const std::string& type) {
  const fs::path root = fs::path(BONFIRE_SOURCE_DIR) / "build" / "testmodels";
  const fs::path dir = root / "demo-gguf";
  const fs::path file = dir / ("model-" + type + ".gguf");
  if (fs::exists(file)) return file;
  fs::create_directories(root);
  const fs::path tmp = root / ("demo-gguf.tmp." + std::to_string(::getpid()));
  const std::string cmd = "/usr/bin/python3 " + (fs::path(BONFIRE_SOURCE_DIR) / "scripts" / "write_test_model.py").string() +
                          " --from-hf " + (fs::path(BONFIRE_SOURCE_DIR) / "models" / "demo").string() + " --out " +
                          tmp.string() + " --gguf q8_0,q4_0 > /dev/null";
  if (std::system(cmd.c_str()) != 0) return {};
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);
  return fs::exists(file) ? file : fs::path();
}

TEST(Perplexity, Int8ActivationsKeepTheDemoPerplexityWithinHalfAPercent) {
  // Issue 14's bar for the int8 default: the held-out perplexity of a q8_0
  // and a q4_0 copy of models/demo, every product with int8 activations,
  // within 0.5% of the f32-activation (--exact) path. First 2,048 tokens.
  const fs::path demo = fs::path(BONFIRE_SOURCE_DIR) / "models" / "demo";
  const json eval = json::parse(read_file((demo / "eval.json").string()));
  const std::string text = read_file((demo / eval.at("file").get<std::string>()).string());
  for (const std::string type : {"q8_0", "q4_0"}) {
    const fs::path file = demo_gguf(type);
    ASSERT_FALSE(file.empty()) << "scripts/write_test_model.py --from-hf failed (needs numpy)";
    ir::LocalModel::Options o;
    o.ctx = eval.at("ctx").get<int64_t>();
    auto model = ir::LocalModel::open(file.string(), o);
    std::vector<int32_t> tokens = ir::perplexity_tokens(*model, text);
    tokens.resize(2048);
    set_int8_activations(Int8Activations::Off);
    const double exact = ir::perplexity(*model, tokens, o.ctx).perplexity;
    set_int8_activations(Int8Activations::All);
    const double int8 = ir::perplexity(*model, tokens, o.ctx).perplexity;
    set_int8_activations(Int8Activations::Small);
    EXPECT_NE(int8, exact) << type << ": the int8 path did not run";
    EXPECT_LT(std::fabs(int8 - exact) / exact, 0.005) << type << ": exact " << exact << ", int8 " << int8;
    std::printf("[ int8 ] demo %s perplexity over 2048 tokens: exact %.4f, int8 %.4f (%+.3f%%)\n", type.c_str(),
                exact, int8, 100.0 * (int8 - exact) / exact);
  }
}

}  // namespace
}  // namespace bonfire
