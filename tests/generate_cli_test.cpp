// `bonfire generate` and `bonfire ir from-hf/lower` through the real command
// line (PROTOCOL.md): the response fields, sampling determinism, stop
// strings, eos, the context limit, a folder's own bonfire.ir.json, and the
// refusals (a tensor missing or of the wrong shape, named at load).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "golden_util.h"
#include "test_models.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using testing::run_command;

const std::string kBin = BONFIRE_BINARY;

fs::path llama_hf() { return testing::test_model("llama", "f32") / "hf"; }

json generate(const std::string& model, const std::string& args, int* status = nullptr) {
  auto [out, st] = run_command(kBin + " generate --model '" + model + "' " + args + " --json 2>/dev/null");
  if (status) *status = st;
  return json::parse(out, nullptr, false);
}

// A writable copy of the llama test folder (safetensors are symlinked).
fs::path copy_of_llama(const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("bonfire_gen_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(llama_hf())) fs::copy(e.path(), dir / e.path().filename());
  return dir;
}

TEST(GenerateCli, JsonResponseHasTheProtocolFields) {
  const json r = generate(llama_hf().string(), "--tokens 7,44,81,118 --max-tokens 5");
  ASSERT_TRUE(r.is_object()) << r;
  for (const char* k : {"model", "text", "tokens", "promptTokens", "finishReason", "timings"}) EXPECT_TRUE(r.contains(k)) << k;
  EXPECT_EQ(r["promptTokens"], 4);
  EXPECT_EQ(r["tokens"].size(), 5u);
  EXPECT_EQ(r["finishReason"], "length");
}

TEST(GenerateCli, PromptTextGoesThroughTheTokenizer) {
  auto [ids, st] = run_command(kBin + " tokenize --model '" + llama_hf().string() + "' --text 'hello world'");
  ASSERT_EQ(st, 0);
  const json want = json::parse(ids);
  const json r = generate(llama_hf().string(), "--prompt 'hello world' --max-tokens 1");
  EXPECT_EQ(r["promptTokens"], want.size());
}

TEST(GenerateCli, SamplingIsKeyedOnSeed) {
  const std::string args = "--tokens 7,44,81,118 --max-tokens 12 --temperature 1.5 --top-k 40 --ignore-eos";
  const json a = generate(llama_hf().string(), args + " --seed 3");
  const json b = generate(llama_hf().string(), args + " --seed 3");
  const json c = generate(llama_hf().string(), args + " --seed 4");
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_NE(a["tokens"], c["tokens"]);
}

TEST(GenerateCli, StopStringEndsTheText) {
  const std::string args = "--tokens 7,44,81,118 --max-tokens 16 --temperature 1.5 --seed 1 --ignore-eos";
  const json full = generate(llama_hf().string(), args);
  const std::string text = full["text"];
  // Two printable ASCII characters after the start (random weights make
  // arbitrary bytes; a stop string is matched on the text's bytes).
  size_t at = 1;
  while (at + 2 <= text.size() && !(std::isalnum((unsigned char)text[at]) && std::isalnum((unsigned char)text[at + 1]))) ++at;
  ASSERT_LT(at + 2, text.size() + 1) << "no ASCII pair in " << full;
  const std::string stop = text.substr(at, 2);
  const json r = generate(llama_hf().string(), args + " --stop '" + stop + "'");
  EXPECT_EQ(r["finishReason"], "stop");
  EXPECT_EQ(r["text"], text.substr(0, text.find(stop)));
}

TEST(GenerateCli, EosFromGenerationConfigStops) {
  const json first = generate(llama_hf().string(), "--tokens 7,44,81,118 --max-tokens 3 --ignore-eos");
  const int eos = first["tokens"][0];
  const fs::path dir = copy_of_llama("eos");
  json gc = testing::read_json(dir / "generation_config.json");
  gc["eos_token_id"] = eos;
  std::ofstream(dir / "generation_config.json") << gc.dump();
  const json r = generate(dir.string(), "--tokens 7,44,81,118 --max-tokens 3");
  EXPECT_EQ(r["finishReason"], "eos");
  EXPECT_EQ(r["tokens"].size(), 0u);  // the eos id is not part of the answer
  EXPECT_EQ(r["text"], "");
  fs::remove_all(dir);
}

TEST(GenerateCli, PromptLongerThanTheContextIsRefused) {
  int status = 0;
  const json r = generate(llama_hf().string(), "--tokens 1,2,3,4,5,6,7,8 --ctx 8", &status);
  EXPECT_EQ(status, 1);
  EXPECT_EQ(r["code"], "too_large") << r;
  // max_tokens is cut to what the context holds.
  const json ok = generate(llama_hf().string(), "--tokens 1,2,3,4,5,6 --ctx 8 --max-tokens 10 --ignore-eos");
  EXPECT_EQ(ok["tokens"].size(), 2u) << ok;
}

TEST(GenerateCli, TokenOutsideTheVocabularyIsRefused) {
  int status = 0;
  const json r = generate(llama_hf().string(), "--tokens 1,2,999999", &status);
  EXPECT_EQ(status, 1);
  EXPECT_EQ(r["code"], "bad_graph");
  EXPECT_NE(r["error"].get<std::string>().find("999999"), std::string::npos) << r;
}

TEST(GenerateCli, MissingOrMisshapenTensorIsRefusedAtLoadByName) {
  const fs::path dir = copy_of_llama("bad");
  auto [doc, st] = run_command(kBin + " ir from-hf '" + dir.string() + "'");
  ASSERT_EQ(st, 0);
  json ir = json::parse(doc);
  ir["block"]["nodes"][1]["weight"] = "model.layers.{i}.self_attn.q_nope.weight";
  std::ofstream(dir / "bonfire.ir.json") << ir.dump();
  int status = 0;
  json r = generate(dir.string(), "--tokens 1,2 --max-tokens 1", &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(r["error"].get<std::string>().find("model.layers.0.self_attn.q_nope.weight"), std::string::npos) << r;
  // A tensor of the wrong shape: k_proj where q_proj belongs (GQA: fewer rows).
  ir["block"]["nodes"][1]["weight"] = "model.layers.{i}.self_attn.k_proj.weight";
  std::ofstream(dir / "bonfire.ir.json") << ir.dump();
  r = generate(dir.string(), "--tokens 1,2 --max-tokens 1", &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(r["error"].get<std::string>().find("k_proj"), std::string::npos) << r;
  fs::remove_all(dir);
}

TEST(GenerateCli, FoldersOwnIrWins) {
  const fs::path dir = copy_of_llama("own");
  auto [doc, st] = run_command(kBin + " ir from-hf '" + dir.string() + "'");
  json ir = json::parse(doc);
  // An extra final scale by 0 makes every logit 0: greedy picks token 0.
  ir["head"]["nodes"].push_back({{"op", "affine"}, {"in", {"logits"}}, {"out", "logits"}, {"scale", 0}, {"shift", 0}});
  std::ofstream(dir / "bonfire.ir.json") << ir.dump();
  const json r = generate(dir.string(), "--tokens 7,44,81 --max-tokens 3 --ignore-eos");
  EXPECT_EQ(r["tokens"], json({0, 0, 0})) << r;
  fs::remove_all(dir);
}

TEST(GenerateCli, ThreadCountsAreCheckedAndThreadsDoNotChangeTheTokens) {
  // --threads 0 or negative: a message naming the flag, exit 2, nothing run.
  for (const std::string bad : {"0", "-3"}) {
    auto [out, st] = run_command(kBin + " generate --model '" + llama_hf().string() +
                                 "' --tokens 1,2,3 --max-tokens 2 --threads " + bad + " 2>&1");
    EXPECT_EQ(st, 2) << bad;
    EXPECT_NE(out.find("--threads must be at least 1"), std::string::npos) << out;
  }
  // More than the cores: lowered with a warning, and the run goes on; the
  // same tokens on 1 thread, all cores and (background) lowest priority.
  auto [warned, st] = run_command(kBin + " generate --model '" + llama_hf().string() +
                                  "' --tokens 1,2,3 --max-tokens 6 --json --threads 100000 2>&1 >/dev/null");
  EXPECT_EQ(st, 0);
  EXPECT_NE(warned.find("--threads 100000 is more than the"), std::string::npos) << warned;
  const json one = generate(llama_hf().string(), "--tokens 1,2,3 --max-tokens 6 --threads 1");
  const json all = generate(llama_hf().string(), "--tokens 1,2,3 --max-tokens 6");
  const json bg = generate(llama_hf().string(), "--tokens 1,2,3 --max-tokens 6 --background");
  ASSERT_TRUE(one.contains("tokens")) << one.dump();
  EXPECT_EQ(one["tokens"], all["tokens"]);
  EXPECT_EQ(one["tokens"], bg["tokens"]);
}

TEST(IrLowerCli, DecodeIsOneGraphWithCachesInTheSession) {
  auto [doc, st] = run_command(kBin + " ir from-hf '" + llama_hf().string() + "' > /tmp/bonfire_llama_ir_" +
                               std::to_string(::getpid()) + ".json");
  ASSERT_EQ(st, 0);
  const std::string file = "/tmp/bonfire_llama_ir_" + std::to_string(::getpid()) + ".json";
  auto [dec, s1] = run_command(kBin + " ir lower " + file + " --mode decode");
  auto [pre, s2] = run_command(kBin + " ir lower " + file + " --mode prefill --tokens 5");
  ASSERT_EQ(s1, 0) << dec;
  ASSERT_EQ(s2, 0) << pre;
  const json d = json::parse(dec), p = json::parse(pre);
  int writes = 0, zeros = 0;
  for (const auto& n : d["nodes"]) {
    writes += n["op"] == "cache_write";
    if (n["op"] == "cache_write") {
      EXPECT_EQ(n["in"][0].get<std::string>().rfind("s:", 0), 0u) << n;
    }
  }
  for (const auto& n : p["nodes"]) zeros += n["op"] == "zeros";
  EXPECT_EQ(writes, 4);  // k and v of 2 layers
  EXPECT_EQ(zeros, 4);
  EXPECT_EQ(p["retain"].size(), 4u);
  EXPECT_EQ(d["outputs"], json({"logits"}));
  fs::remove(file);
}

TEST(IrFromHf, GgufAndFolderGiveTheSameDocumentForLlama) {
  const fs::path dir = testing::test_model("llama", "f32");
  auto [a, s1] = run_command(kBin + " ir from-hf '" + (dir / "hf").string() + "'");
  auto [b, s2] = run_command(kBin + " ir from-hf '" + (dir / "model-f32.gguf").string() + "'");
  ASSERT_EQ(s1, 0);
  ASSERT_EQ(s2, 0);
  json ja = json::parse(a), jb = json::parse(b);
  // The same document, but for Llama 3's rope factors: numbers from
  // config.json, the rope_freqs tensor in the GGUF (equal values).
  for (auto* j : {&ja, &jb})
    for (auto& n : (*j)["block"]["nodes"]) n.erase("freq_factors");
  EXPECT_EQ(ja["block"], jb["block"]);
  EXPECT_EQ(ja["head"], jb["head"]);
  EXPECT_EQ(ja["model"]["vocab"], jb["model"]["vocab"]);
}

}  // namespace
}  // namespace bonfire

namespace bonfire {
namespace {

// Phi-3's LongRoPE: short factors while the session's context fits the
// original one, long factors past it (as llama.cpp chooses by n_ctx), with
// transformers' attention factor sqrt(1 + ln(s)/ln(original)).
TEST(IrLowerCli, LongRopeFactorsFollowTheSessionContext) {
  const fs::path src = testing::test_model("phi3", "f32") / "hf";
  const fs::path dir = fs::temp_directory_path() / ("bonfire_longrope_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src)) fs::copy(e.path(), dir / e.path().filename());
  json c = testing::read_json(dir / "config.json");
  const int64_t half = c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>() / 2;
  json shorts = json::array(), longs = json::array();
  for (int64_t j = 0; j < half; ++j) shorts.push_back(1.0 + 0.1 * j), longs.push_back(2.0 + 0.5 * j);
  c["original_max_position_embeddings"] = 64;
  c["max_position_embeddings"] = 512;
  c["rope_scaling"] = {{"type", "longrope"}, {"short_factor", shorts}, {"long_factor", longs}};
  std::ofstream(dir / "config.json") << c.dump();
  const std::string ir = (dir / "model.ir.json").string();
  ASSERT_EQ(run_command(kBin + " ir from-hf '" + dir.string() + "' > '" + ir + "'").second, 0);
  const double theta = c.value("rope_theta", 10000.0);
  for (int64_t ctx : {32, 128}) {
    auto [out, st] = run_command(kBin + " ir lower '" + ir + "' --mode decode --ctx " + std::to_string(ctx) +
                                 " --model '" + dir.string() + "'");
    ASSERT_EQ(st, 0) << out;
    const json g = json::parse(out);
    int ropes = 0;
    for (const auto& n : g["nodes"]) {
      if (n["op"] != "rope") continue;
      ++ropes;
      const json& f = ctx > 64 ? longs : shorts;
      for (int64_t j = 0; j < half; ++j)
        EXPECT_NEAR(n["params"]["invFreq"][j].get<double>(),
                    std::pow(theta, -2.0 * j / (2 * half)) / f[j].get<double>(), 1e-6)
            << "ctx " << ctx << " j " << j;
      EXPECT_NEAR(n["params"]["attentionFactor"].get<double>(), std::sqrt(1 + std::log(8.0) / std::log(64.0)), 1e-9);
    }
    EXPECT_GT(ropes, 0);
    // And generation runs with it.
    auto [gen, gst] = run_command(kBin + " generate --model '" + dir.string() + "' --tokens 1,2,3 --max-tokens 2 --json --ctx " +
                                  std::to_string(ctx));
    EXPECT_EQ(gst, 0) << gen;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace bonfire
