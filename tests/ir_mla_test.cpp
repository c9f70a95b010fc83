// Absorbed multi-head latent attention (issue 19, docs/IR.md §7): the cache
// holds the latent [c | k_pe] per position, as llama.cpp's does, and a step
// attends over it directly: nothing reads the cache except the write and the
// attention, so no per-head keys or values are rebuilt from it. Numerics
// against llama.cpp: generate_golden_test.cpp (deepseek_v3); against
// PyTorch: ir_models_test.cpp (mla_moe). Speed: scripts/bench_mla.py.
#include <gtest/gtest.h>

#include <regex>

#include "ir/generation.h"
#include "ir/lower.h"
#include "model/config.h"
#include "test_models.h"

namespace bonfire {
namespace {

using json = nlohmann::json;

std::unique_ptr<ir::LocalModel> deepseek() {
  const auto dir = testing::test_model("deepseek_v3", "f32", {});
  if (dir.empty()) return nullptr;
  ir::LocalModel::Options o;
  o.ctx = 64;
  return ir::LocalModel::open((dir / "hf").string(), o);
}

TEST(AbsorbedMla, OnlyTheWriteAndTheAttentionReadTheLatentCache) {
  auto model = deepseek();
  ASSERT_TRUE(model) << "could not write the deepseek_v3 test model";
  ir::LowerOptions o;
  o.mode = "decode";
  o.ctx = 64;
  const json call = ir::lower(model->ir(), o, &model->weights());
  std::set<std::string> cache_refs;
  int attentions = 0;
  for (const auto& n : call["nodes"]) {
    bool reads_cache = false;
    for (const auto& in : n["in"]) {
      const std::string r = in.get<std::string>();
      reads_cache = reads_cache || cache_refs.count(r) || std::regex_match(r, std::regex(R"(s:L\d+\.kv\.k)"));
    }
    if (!reads_cache) continue;
    const std::string op = n["op"].get<std::string>();
    EXPECT_TRUE(op == "cache_write" || op == "attention") << n["id"] << " (" << op << ") reads the latent cache";
    if (op == "cache_write") cache_refs.insert(n["id"].get<std::string>());
    if (op == "attention") {
      ++attentions;
      EXPECT_EQ(n["params"]["kvHeads"], 1) << "one latent shared by every head";
    }
  }
  EXPECT_EQ(attentions, model->ir()["model"]["n_layers"].get<int>());
}

TEST(AbsorbedMla, TheCacheHoldsTheLatentOnly) {
  auto model = deepseek();
  ASSERT_TRUE(model) << "could not write the deepseek_v3 test model";
  const ModelConfig& c = model->config();
  ir::LowerOptions o;
  o.mode = "prefill";
  o.ctx = 64;
  const json call = ir::lower(model->ir(), o, &model->weights());
  int64_t layers = 0;
  for (const auto& n : call["nodes"]) {
    if (n["op"] != "zeros") continue;
    ++layers;
    // [ctx, kv_lora_rank + qk_rope_head_dim]: llama.cpp's K cache row; no V cache.
    EXPECT_EQ(n["params"]["shape"], json({64, c.kv_lora_rank + c.qk_rope_head_dim})) << n["id"];
  }
  EXPECT_EQ(layers, c.n_layers);
}

TEST(AbsorbedMla, InconsistentRanksAreRefusedBeforeWeightsNamingTheField) {
  const json base = {{"model_type", "deepseek_v3"}, {"vocab_size", 64},      {"hidden_size", 32},
                     {"num_hidden_layers", 1},      {"num_attention_heads", 2}, {"kv_lora_rank", 16},
                     {"qk_rope_head_dim", 8},       {"qk_nope_head_dim", 8},    {"v_head_dim", 8},
                     {"intermediate_size", 64},     {"n_routed_experts", 2},    {"num_experts_per_tok", 1}};
  EXPECT_NO_THROW(parse_hf_config(base, "cfg"));
  auto refused = [&](json j, const std::string& field) {
    try {
      parse_hf_config(j, "cfg");
      ADD_FAILURE() << "accepted " << j.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  json j = base;
  j["qk_head_dim"] = 17;
  refused(j, "qk_head_dim");
  j = base;
  j["qk_rope_head_dim"] = 7;
  refused(j, "qk_rope_head_dim");
  j = base;
  j.erase("kv_lora_rank");
  refused(j, "kv_lora_rank");
}

}  // namespace
}  // namespace bonfire
