// Quantized MoE checkpoints in ONNX Runtime GenAI's int4 QMoE layout
// (docs/QMOE.md "Checkpoints") load through the normal model path:
// config.json's quantization_config → the IR's moe_ffn over packed experts →
// the protocol op moe with layout "qmoe" → the QMoE kernel package. The
// golden (scripts/qmoe/gen_model_golden.py) is a float64 PyTorch forward of
// the same tiny Qwen3-MoE with the DEQUANTIZED experts and ORT's routing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/executor.h"
#include "graph/graph.h"
#include "ir/generation.h"
#include "ir/lower.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kDir = fs::path(BONFIRE_SOURCE_DIR) / "goldens" / "qmoe_model";

// max |got - want| / max |want| over the logits. bonfire runs in float32
// (attention, norms, the package's float activations), the reference in
// float64 over the same dequantized weights: two layers of 64-wide float32
// dot products leave ~1e-6 of the logit scale (measured below, printed).
// 1e-4 keeps a wide margin over that, while a wrong reading of the layout
// (nibble order, gate/up interleaving, column-wise vs block-wise scales,
// softmax over all experts instead of the selected k) moves logits by
// 1e-2..1 of their scale (QmoeModelCheck.WrongNibbleOrderMisses shows one).
constexpr double kTolerance = 1e-4;

json golden() {
  std::ifstream f(kDir / "golden.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

double rel_diff(const std::vector<float>& got, const std::vector<double>& want) {
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(want[i]));
    const double d = std::fabs(double(got[i]) - want[i]);
    max_diff = std::max(max_diff, std::isnan(d) ? INFINITY : d);
  }
  return max_diff / max_ref;
}

std::vector<double> flat(const json& rows, size_t n_rows) {
  std::vector<double> v;
  for (size_t r = 0; r < n_rows; ++r)
    for (double x : rows[r]) v.push_back(x);
  return v;
}

class QmoeModel : public ::testing::TestWithParam<std::string> {};

TEST_P(QmoeModel, LogitsMatchPyTorch) {
  const json g = golden();
  const json& m = g["models"][GetParam()];
  std::vector<int32_t> prompt = g["prompt"].get<std::vector<int32_t>>();
  ir::LocalModel::Options o;
  o.ctx = 64;
  auto model = ir::LocalModel::open((kDir / GetParam()).string(), o);
  EXPECT_EQ(model->config().expert_quant, "qmoe");
  EXPECT_EQ(model->config().expert_quant_block, m["config"]["block_size"].get<int64_t>());

  // The lowered step uses moe with layout "qmoe" on the packed tensors.
  ir::LowerOptions lo;
  lo.mode = "prefill";
  lo.tokens = 4;
  const json call = ir::lower(model->ir(), lo, &model->weights());
  int qmoe_nodes = 0;
  for (const auto& n : call["nodes"])
    if (n["op"] == "moe") {
      EXPECT_EQ(n["params"]["layout"], "qmoe") << n.dump();
      EXPECT_EQ(n["in"][2], "w:model.layers." + std::to_string(qmoe_nodes) + ".mlp.experts.fc1_experts_weights");
      EXPECT_EQ(n["in"][3], "w:model.layers." + std::to_string(qmoe_nodes) + ".mlp.experts.fc1_scales");
      ++qmoe_nodes;
    }
  EXPECT_EQ(qmoe_nodes, 2);

  // Every position of the prompt (a prefill of 10 tokens: the grouped
  // variant), and the first token alone (one token: the decode GEMV).
  const size_t V = m["logits"][0].size();
  const std::vector<float> all = model->all_logits(prompt);
  ASSERT_EQ(all.size(), prompt.size() * V);
  const double rel = rel_diff(all, flat(m["logits"], prompt.size()));
  std::printf("[ qmoe model ] %s prefill T=%zu: max |diff| / max |logit| = %.3g\n", GetParam().c_str(), prompt.size(),
              rel);
  EXPECT_LE(rel, kTolerance);
  const std::vector<float> one = model->all_logits({prompt[0]});
  const double rel1 = rel_diff(one, flat(m["logits"], 1));
  std::printf("[ qmoe model ] %s T=1: max |diff| / max |logit| = %.3g\n", GetParam().c_str(), rel1);
  EXPECT_LE(rel1, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(QmoeModels, QmoeModel, ::testing::Values("blk16", "col"),
                         [](const auto& info) { return info.param; });

// The test can fail: the same prefill run through the lowered graph by hand,
// once as it is (equal to the golden) and once with layer 0's fc1 codes read
// high nibble first (a wrong reading of ORT's rule Q1), which must miss by
// far more than kTolerance.
TEST(QmoeModelCheck, WrongNibbleOrderMisses) {
  const json g = golden();
  const std::vector<int32_t> prompt = g["prompt"].get<std::vector<int32_t>>();
  const int64_t T = (int64_t)prompt.size();
  ir::LocalModel::Options o;
  o.ctx = 64;
  auto model = ir::LocalModel::open((kDir / "blk16").string(), o);
  ir::LowerOptions lo;
  lo.mode = "prefill";
  lo.tokens = T;
  lo.all_logits = true;
  json lowered = ir::lower(model->ir(), lo, &model->weights());
  lowered["inputs"] = {{"tokens", {{"shape", {T}}, {"data", std::vector<float>(T, 0.f)}}}};
  lowered["session"] = "qmoe_model";
  const Call call = Call::parse(lowered, Limits());

  const std::string fc1 = "model.layers.0.mlp.experts.fc1_experts_weights";
  const Tensor* orig = model->weights().find(fc1);
  ASSERT_NE(orig, nullptr);
  ASSERT_EQ(orig->dtype, DType::U8);
  auto swapped = std::make_shared<std::vector<uint8_t>>(orig->numel());
  const uint8_t* src = static_cast<const uint8_t*>(orig->data);
  for (int64_t i = 0; i < orig->numel(); ++i) (*swapped)[i] = (uint8_t)((src[i] >> 4) | (src[i] << 4));
  const Tensor wrong = Tensor::view(DType::U8, orig->shape, swapped->data(), swapped);

  auto run = [&](bool swap) {
    Tensor ids = Tensor::empty({T});
    for (int64_t i = 0; i < T; ++i) ids.f32()[i] = (float)prompt[i];
    const WeightLookup lookup = [&](const std::string& name) -> const Tensor* {
      if (swap && name == fc1) return &wrong;
      auto it = call.weights.find(name);
      return it != call.weights.end() ? &it->second : model->weights().find(name);
    };
    Session session;
    Limits limits;
    limits.max_total_bytes = int64_t(1) << 32;
    const auto out = run_graph(call.graph, {{"tokens", ids}}, json{{"pos", 0}, {"step", 0}}, lookup, &session, limits);
    const Tensor& l = out.outputs.at("logits");
    return std::vector<float>(l.f32(), l.f32() + l.numel());
  };
  const std::vector<double> want = flat(g["models"]["blk16"]["logits"], prompt.size());
  const double right = rel_diff(run(false), want), wrong_rel = rel_diff(run(true), want);
  std::printf("[ qmoe model ] blk16 by hand: %.3g; high nibble first: %.3g\n", right, wrong_rel);
  EXPECT_LE(right, kTolerance);
  EXPECT_GT(wrong_rel, 100 * kTolerance);
}

}  // namespace
}  // namespace bonfire
