// Every family's test model, read from its HF folder and from its GGUF file,
// must describe the same model: the same hyperparameters, the same tensors
// under the same names, with the same values (the f32 GGUF holds exactly the
// safetensors values, so after undoing the converter's rearrangements the
// two must agree bit for bit, or within f32 rounding where a value moved).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/gguf.h"
#include "model/model_files.h"
#include "test_models.h"

namespace bonfire {
namespace {

class FamilyFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyFiles, HfAndGgufAgree) {
  const auto dir = testing::test_model(GetParam());
  ASSERT_FALSE(dir.empty()) << "scripts/write_test_model.py failed for " << GetParam();
  const auto hf = ModelFiles::open((dir / "hf").string());
  const auto gg = ModelFiles::open((dir / "model-f32.gguf").string());
  const ModelConfig a = hf->config(), b = gg->config();
  EXPECT_EQ(a.family, GetParam());
  // GGUF has one architecture ("llama") for Llama and Mistral.
  EXPECT_EQ(b.family, a.family == "mistral" ? "llama" : a.family);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.norm, b.norm);
  EXPECT_NEAR(a.norm_eps, b.norm_eps, 1e-12);
  EXPECT_EQ(a.n_experts, b.n_experts);
  EXPECT_EQ(a.n_experts_per_tok, b.n_experts_per_tok);
  if (a.n_experts == 0) {
    EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  }
  EXPECT_EQ(a.alibi, b.alibi);
  if (!a.alibi && a.partial_rotary_factor > 0) {
    EXPECT_NEAR(a.rope_theta, b.rope_theta, 1e-6 * a.rope_theta);
  }
  if (GetParam() == "lfm2") {
    EXPECT_EQ(a.layer_types, b.layer_types);
  }

  const WeightStore wa = hf->weights(), wb = gg->weights();
  int compared = 0, missing = 0;
  for (const auto& name : wa.names()) {
    const Tensor* x = wa.find(name);
    // BLOOM checkpoints exist with and without the "transformer." prefix.
    const Tensor* y = wb.find(name);
    if (!y && name.rfind("transformer.", 0) == 0) y = wb.find(name.substr(12));
    if (!y) {
      ++missing;
      ADD_FAILURE() << name << " is in the HF folder but not in the GGUF (under its HF name)";
      continue;
    }
    ASSERT_EQ(x->shape, y->shape) << name;
    const Tensor fx = to_f32(*x), fy = to_f32(*y);
    int64_t bad = 0;
    for (int64_t i = 0; i < fx.numel(); ++i)
      if (std::fabs(fx.f32()[i] - fy.f32()[i]) > 1e-6f * (1 + std::fabs(fx.f32()[i]))) ++bad;
    EXPECT_EQ(bad, 0) << name << ": " << bad << " of " << fx.numel() << " values differ";
    ++compared;
  }
  EXPECT_GT(compared, 5);
  EXPECT_EQ(missing, 0);
}

TEST_P(FamilyFiles, TokenizersAgree) {
  const auto dir = testing::test_model(GetParam());
  ASSERT_FALSE(dir.empty());
  const auto a = ModelFiles::open((dir / "hf").string())->tokenizer();
  const auto b = ModelFiles::open((dir / "model-f32.gguf").string())->tokenizer();
  for (const char* s : {"Hello world", "  two  spaces\nand a line", "café 123 ☃", ""}) {
    EXPECT_EQ(a->encode(s, false), b->encode(s, false)) << s;
    EXPECT_EQ(a->decode(a->encode(s, false)), s);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyFiles, ::testing::ValuesIn(known_families()),
                         [](const auto& info) { return info.param; });

TEST(ModelFiles, MissingPiecesAreNamed) {
  EXPECT_THROW(ModelFiles::open("/no/such/model"), Error);
  const auto dir = testing::test_model("llama");
  ASSERT_FALSE(dir.empty());
  try {
    ModelFiles::open((dir / "model-f32.gguf").string())->chat_template(nullptr);
  } catch (const Error&) {
  }
  const auto hf = ModelFiles::open((dir / "hf").string());
  EXPECT_EQ(hf->config().family, "llama");
  EXPECT_GT(hf->generation_config().eos_token_ids.size(), 0u);
}

}  // namespace
}  // namespace bonfire
