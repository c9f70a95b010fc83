// Every family's test model, read from its HF folder and from its GGUF file,
// must describe the same model: the same hyperparameters, the same tensors
// under the same names, with the same values (the f32 GGUF holds exactly the
// safetensors values, so after undoing the converter's rearrangements the
// two must agree bit for bit, or within f32 rounding where a value moved).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <tuple>

#include "core/error.h"
#include "ir/generation.h"
#include "model/family.h"
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

// The family table (model/family.h): each model_type and each GGUF
// architecture has exactly one module, every architecture reads as a
// model_type some module owns, and every module writes a document.
TEST(FamilyRegistry, OneModulePerNameAndEveryArchReadsAsAKnownFamily) {
  std::set<std::string> types, archs;
  for (const Family& f : family_registry()) {
    EXPECT_TRUE(f.document) << f.model_types.front();
    ASSERT_FALSE(f.model_types.empty());
    for (const char* t : f.model_types) {
      EXPECT_TRUE(types.insert(t).second) << "model_type " << t << " has two modules";
      EXPECT_EQ(find_family(t), &f) << t;
    }
    for (const GgufArch& a : f.gguf) {
      EXPECT_TRUE(archs.insert(a.arch).second) << "GGUF architecture " << a.arch << " has two modules";
      const GgufArch* entry = nullptr;
      EXPECT_EQ(find_gguf_family(a.arch, &entry), &f) << a.arch;
      EXPECT_EQ(entry, &a) << a.arch;
      EXPECT_EQ(find_family(a.model_type), &f) << a.arch << " reads as " << a.model_type << ", which another module owns";
      EXPECT_FALSE(a.names.block_prefix.empty()) << a.arch;
    }
  }
  EXPECT_EQ(types.size(), known_families().size());
  EXPECT_EQ(find_family("no_such_family"), nullptr);
  EXPECT_EQ(find_gguf_family("no_such_arch"), nullptr);
  // A name the table lacks is refused naming it and the known ones.
  ModelConfig c;
  c.family = "no_such_family";
  c.source = "config.json";
  try {
    family_document(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"no_such_family\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gemma3_text"), std::string::npos) << e.what();
  }
}

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

// Config sanity (issue 13, item 2): every size a config.json or GGUF
// metadata claims is checked against the tensors present and against
// bounds before anything is sized by it, and refused with the key's name.
// (Measured by hand: a config.json claiming 10^9 layers used to spend over
// a minute allocating before failing; it is now refused in milliseconds.)

namespace fs = std::filesystem;
using nlohmann::json;

// A copy of the llama test model's HF folder with config.json edited.
fs::path edited_hf(const std::string& name, const std::function<void(json&)>& edit) {
  const auto dir = testing::test_model("llama");
  if (dir.empty()) return {};
  const fs::path out = fs::path(BONFIRE_SOURCE_DIR) / "build" / "testmodels" / ("sanity-" + name);
  fs::remove_all(out);
  fs::copy(dir / "hf", out, fs::copy_options::recursive);
  json cfg = testing::read_json(out / "config.json");
  edit(cfg);
  std::ofstream(out / "config.json") << cfg.dump(2);
  return out;
}

// The Error message config() gives for the model at `path` ("" when none).
std::string config_error(const fs::path& path) {
  try {
    ModelFiles::open(path.string())->config();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigSanity, BillionLayersInConfigJsonRefusedNamingTheField) {
  const fs::path dir = edited_hf("layers", [](json& c) { c["num_hidden_layers"] = 1000000000; });
  ASSERT_FALSE(dir.empty());
  EXPECT_NE(config_error(dir).find("config.json: num_hidden_layers = 1000000000 but the checkpoint has tensors "
                                   "for 2 layers"),
            std::string::npos)
      << config_error(dir);
  // The whole path a server takes refuses it the same way.
  try {
    ir::LocalModel::open(dir.string(), {});
    ADD_FAILURE() << "a config claiming 10^9 layers was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_hidden_layers = 1000000000"), std::string::npos) << e.what();
  }
}

TEST(ConfigSanity, OtherAbsurdSizesRefusedNamingTheField) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& c) { c["num_hidden_layers"] = 8; }, "num_hidden_layers = 8 but the checkpoint has tensors for 2 layers"},
      {[](json& c) { c["hidden_size"] = 1000000000000LL; },
       "hidden_size = 1000000000000 but the embedding model.embed_tokens.weight is [384, 64]"},
      {[](json& c) { c["vocab_size"] = 10000000000LL; },
       "vocab_size = 10000000000 but the embedding model.embed_tokens.weight has 384 rows"},
      {[](json& c) { c["num_attention_heads"] = 1000000; }, "num_attention_heads = 1000000 is out of range"},
      {[](json& c) { c["num_attention_heads"] = 8; },
       "num_attention_heads = 8 × head_dim 16 = 128 but model.layers.0.self_attn.q_proj.weight has 64 rows"},
      {[](json& c) { c["num_key_value_heads"] = 4; },
       "num_key_value_heads = 4 × head_dim 16 = 64 but model.layers.0.self_attn.k_proj.weight has 32 rows"},
      {[](json& c) { c["intermediate_size"] = 1000000000; },
       "intermediate_size = 1000000000 but model.layers.0.mlp.up_proj.weight has 128 rows"},
      {[](json& c) { c["max_position_embeddings"] = 1000000000000000LL; },
       "max_position_embeddings = 1000000000000000 is out of range"},
      {[](json& c) { c["num_hidden_layers"] = 1e300; }, "num_hidden_layers = 1e+300 is not an integer"},
      {[](json& c) { c["head_dim"] = 2.5; }, "head_dim = 2.5 is not an integer"},
  };
  int i = 0;
  for (const auto& [edit, want] : cases) {
    const fs::path dir = edited_hf("case" + std::to_string(i++), edit);
    ASSERT_FALSE(dir.empty());
    const std::string got = config_error(dir);
    EXPECT_NE(got.find(want), std::string::npos) << "want: " << want << "\n got: " << got;
  }
}

// A multimodal checkpoint's vision tower has layers and q_proj weights of
// its own; the checks look at the language model's only.
TEST(ConfigSanity, VisionTowerTensorsDoNotCount) {
  const fs::path dir = edited_hf("vision", [](json&) {});
  ASSERT_FALSE(dir.empty());
  // One extra safetensors file: an [8, 4] f32 q_proj in layer 0 and a layer 40.
  const std::string names[] = {"vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight",
                               "vision_tower.vision_model.encoder.layers.40.mlp.fc1.weight"};
  json header = json::object();
  for (int i = 0; i < 2; ++i)
    header[names[i]] = {{"dtype", "F32"}, {"shape", {8, 4}}, {"data_offsets", {i * 128, i * 128 + 128}}};
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::string file(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(file.data(), &n, 8);
  file += h + std::string(256, '\0');
  std::ofstream(dir / "vision.safetensors", std::ios::binary) << file;
  const std::string err = config_error(dir);
  EXPECT_EQ(err, "");
  EXPECT_EQ(ModelFiles::open(dir.string())->census().layers, 2);
  EXPECT_EQ(ModelFiles::open(dir.string())->census().q.name, "model.layers.0.self_attn.q_proj.weight");
}

// The f32 GGUF of the llama test model with one u32 metadata value replaced.
fs::path edited_gguf(const std::string& name, const std::string& key, uint32_t value) {
  const auto dir = testing::test_model("llama");
  if (dir.empty()) return {};
  std::string bytes = testing::slurp(dir / "model-f32.gguf");
  // A key is stored as u64 length, the bytes, then u32 type (4 = u32), value.
  const std::string needle = key;
  const size_t at = bytes.find(needle);
  if (at == std::string::npos || bytes.compare(at + needle.size(), 4, std::string("\x04\0\0\0", 4)) != 0) return {};
  std::memcpy(&bytes[at + needle.size() + 4], &value, 4);
  const fs::path out = fs::path(BONFIRE_SOURCE_DIR) / "build" / "testmodels" / ("sanity-" + name + ".gguf");
  std::ofstream(out, std::ios::binary) << bytes;
  return out;
}

TEST(ConfigSanity, AbsurdGgufMetadataRefusedNamingTheKey) {
  const std::vector<std::tuple<std::string, uint32_t, std::string>> cases = {
      {"llama.block_count", 1000000000u, "llama.block_count = 1000000000 but the checkpoint has tensors for 2 layers"},
      {"llama.embedding_length", 4000000000u,
       "llama.embedding_length = 4000000000 but the embedding token_embd.weight is [384, 64]"},
      {"llama.attention.head_count", 1000000u, "llama.attention.head_count = 1000000 "},
      {"llama.feed_forward_length", 1000000000u,
       "llama.feed_forward_length = 1000000000 but blk.0.ffn_up.weight has 128 rows"},
      {"llama.context_length", 4000000000u, ""},
  };
  for (const auto& [key, value, want] : cases) {
    const fs::path path = edited_gguf(key, key, value);
    ASSERT_FALSE(path.empty()) << key;
    const std::string got = config_error(path);
    if (want.empty()) {
      EXPECT_EQ(got, "") << key << " = " << value << " is large but within bounds";
    } else {
      EXPECT_NE(got.find(want), std::string::npos) << "want: " << want << "\n got: " << got;
    }
  }
}

// LongRoPE in the converter's layout (factor tensors, no rope.scaling.type):
// the keys it comes with, and llama.cpp's defaults when they are missing
// (attn_factor 1, original context = context_length). A key is hidden by
// renaming it in place to one nobody reads.
TEST(ConverterLayout, Phi3LongRopeKeysAndTheirDefaults) {
  const auto dir = testing::test_model("phi3", "f32,f16,q8_0", {"--longrope", "32", "--std", "0.05"});
  ASSERT_FALSE(dir.empty());
  const std::string bytes = testing::slurp(dir / "model-f32.gguf");
  auto config_with = [&](const std::string& hide) {
    std::string b = bytes;
    if (!hide.empty()) {
      const size_t at = b.find(hide);
      EXPECT_NE(at, std::string::npos) << hide;
      if (at != std::string::npos) b[at + hide.size() - 1] = 'X';
    }
    const fs::path out = fs::path(BONFIRE_SOURCE_DIR) / "build" / "testmodels" / "phi3-longrope-keys.gguf";
    std::ofstream(out, std::ios::binary) << b;
    return ModelFiles::open(out.string())->config();
  };
  const double attn = std::sqrt(1 + std::log(4096.0 / 32) / std::log(32.0));
  const ModelConfig c = config_with("");
  ASSERT_TRUE(c.rope_scaling.is_object());
  EXPECT_EQ(c.rope_scaling["rope_type"], "longrope");
  EXPECT_EQ(c.rope_scaling["original_max_position_embeddings"], 32);
  EXPECT_NEAR(c.rope_scaling["attention_factor"].get<double>(), attn, 1e-6);
  const ModelConfig no_attn = config_with("phi3.rope.scaling.attn_factor");
  EXPECT_EQ(no_attn.rope_scaling["attention_factor"], 1.0);
  const ModelConfig no_orig = config_with("phi3.rope.scaling.original_context_length");
  EXPECT_EQ(no_orig.rope_scaling["original_max_position_embeddings"], 4096);
}

}  // namespace
}  // namespace bonfire
