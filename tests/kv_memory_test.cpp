// What a session keeps, per kind of layer (ir/kv_memory.h), against the
// arithmetic of each cache: a Gemma-2-shaped model at a 32k context keeps
// rings of its window on the sliding layers and full caches on the others;
// DeepSeek's latent cache is kv_lora_rank + qk_rope wide; LFM2's convolution
// layers keep kernel - 1 rows.
#include <gtest/gtest.h>

#include "ir/generation.h"
#include "ir/kv_memory.h"
#include "test_models.h"

namespace bonfire {
namespace {

std::unique_ptr<ir::LocalModel> open_model(const std::string& family, const std::vector<std::string>& args,
                                           int64_t ctx) {
  const auto dir = testing::test_model(family, "f32", args);
  if (dir.empty()) return nullptr;
  ir::LocalModel::Options o;
  o.ctx = ctx;
  return ir::LocalModel::open((dir / "hf").string(), o);
}

const ir::KvLayerKind* kind(const ir::KvMemory& m, const std::string& name) {
  for (const auto& k : m.kinds)
    if (k.kind == name) return &k;
  return nullptr;
}

TEST(KvMemory, SlidingLayersKeepRingsOfTheirWindowAt32k) {
  auto model = open_model("gemma2", {"--layers", "4", "--sliding-window", "4096", "--ctx", "32768"}, 32768);
  ASSERT_TRUE(model) << "could not write the gemma2 test model";
  const ModelConfig& c = model->config();
  const ir::KvMemory m = ir::kv_memory(model->ir(), 32768, &model->weights());
  std::cout << "[ kv ] " << m.summary() << "\n";
  const int64_t row = 2 * c.n_kv_heads * c.head_dim * 4;  // k and v, f32
  const auto* ring = kind(m, "window");
  const auto* full = kind(m, "attention");
  ASSERT_TRUE(ring && full) << m.to_json().dump();
  EXPECT_EQ(ring->layers, 2);
  EXPECT_EQ(ring->fixed_bytes, 4096 * row);
  EXPECT_EQ(ring->bytes_per_token, 0);
  EXPECT_EQ(full->layers, 2);
  EXPECT_EQ(full->bytes_per_token, row);
  EXPECT_EQ(m.bytes, 2 * 4096 * row + 2 * 32768 * row);
  // A window as long as the context is full attention: no ring.
  const ir::KvMemory small = ir::kv_memory(model->ir(), 4096, &model->weights());
  EXPECT_EQ(kind(small, "window"), nullptr) << small.summary();
  EXPECT_EQ(small.bytes, 4 * 4096 * row) << small.summary();
}

TEST(KvMemory, LatentAndRecurrentLayers) {
  auto ds = open_model("deepseek_v3", {}, 64);
  ASSERT_TRUE(ds) << "could not write the deepseek_v3 test model";
  const ir::KvMemory m = ir::kv_memory(ds->ir(), 64, &ds->weights());
  const auto* latent = kind(m, "latent");
  ASSERT_TRUE(latent) << m.summary();
  EXPECT_EQ(latent->layers, ds->config().n_layers);
  EXPECT_EQ(latent->bytes_per_token, (ds->config().kv_lora_rank + ds->config().qk_rope_head_dim) * 4);

  auto lfm = open_model("lfm2", {"--layers", "4"}, 64);
  ASSERT_TRUE(lfm) << "could not write the lfm2 test model";
  const ir::KvMemory l = ir::kv_memory(lfm->ir(), 64, &lfm->weights());
  const auto* conv = kind(l, "recurrent");
  const auto* attn = kind(l, "attention");
  ASSERT_TRUE(conv && attn) << l.summary();
  EXPECT_EQ(conv->layers, 2);
  EXPECT_EQ(conv->fixed_bytes, (lfm->config().conv_kernel - 1) * lfm->config().hidden_size * 4);
  EXPECT_EQ(attn->layers, 2);
}

}  // namespace
}  // namespace bonfire
