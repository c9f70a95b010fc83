// safetensors files written by scripts/gen_safetensors_goldens.py, values
// from PyTorch; and every kind of broken file refused by name.
#include <gtest/gtest.h>

#include "core/error.h"
#include "golden_util.h"
#include "model/safetensors.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

fs::path dir() { return testing::source_dir() / "goldens" / "safetensors"; }

void expect_store_matches(const WeightStore& store, const json& want) {
  EXPECT_EQ(store.size(), want.size());
  for (const auto& [name, t] : want.items()) {
    const Tensor* got = store.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_TRUE(testing::near(*got, t, 0, 0)) << name;  // bit-exact after widening
  }
}

TEST(Safetensors, ReadsEveryDtypeAsStored) {
  const json want = testing::read_json(dir() / "expected.json");
  WeightStore store;
  load_safetensors_file((dir() / "mixed.safetensors").string(), store);
  expect_store_matches(store, want["mixed.safetensors"]);
  // f16/bf16 stay packed (read as stored), f32 is a view, not a copy.
  EXPECT_EQ(store.find("model.layers.0.self_attn.q_proj.weight")->dtype, DType::F16);
  EXPECT_EQ(store.find("model.norm.weight")->dtype, DType::BF16);
  EXPECT_EQ(store.find("model.embed_tokens.weight")->dtype, DType::F32);
}

TEST(Safetensors, UnalignedDataIsRead) {
  const json want = testing::read_json(dir() / "expected.json");
  WeightStore store;
  load_safetensors_file((dir() / "unaligned.safetensors").string(), store);
  expect_store_matches(store, want["unaligned.safetensors"]);
}

TEST(Safetensors, ShardedFolderThroughIndex) {
  const json want = testing::read_json(dir() / "expected.json");
  WeightStore store;
  load_safetensors_folder((dir() / "sharded").string(), store);
  expect_store_matches(store, want["sharded"]);
}

// Writes `bytes` to a temp file and returns the error the loader gives.
std::string load_error(const std::string& bytes, const std::string& name = "broken.safetensors") {
  const fs::path p = fs::temp_directory_path() / ("bonfire_st_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  std::string msg;
  try {
    WeightStore store;
    load_safetensors_file(p.string(), store);
  } catch (const Error& e) {
    msg = e.what();
  }
  fs::remove(p);
  return msg;
}

std::string with_header(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

// A header whose length is odd leaves an f16/bf16/i32 tensor at an odd
// address in the mapping; the loader copies it to an aligned buffer rather
// than hand out a view read through a misaligned pointer (found by
// fuzz_safetensors; tests/fuzz/corpus/safetensors/ub-unaligned-f16.safetensors).
TEST(Safetensors, UnalignedNarrowTensorsAreCopiedAligned) {
  const std::string header =
      R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},  )"
      R"("b": {"dtype": "I32", "shape": [1], "data_offsets": [4, 8]}})";
  ASSERT_EQ(header.size() % 2, 1u);
  const char data[8] = {0x00, 0x3c, 0x00, (char)0xc0, 0x07, 0x00, 0x00, 0x00};  // f16 1, -2; i32 7
  const fs::path p = fs::temp_directory_path() / ("bonfire_st_" + std::to_string(::getpid()) + "_odd.safetensors");
  std::ofstream(p, std::ios::binary) << with_header(header, std::string(data, 8));
  WeightStore store;
  load_safetensors_file(p.string(), store);
  fs::remove(p);
  const Tensor* a = store.find("a");
  const Tensor* b = store.find("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % 2, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % 4, 0u);
  const Tensor fa = to_f32(*a), fb = to_f32(*b);
  EXPECT_EQ(fa.f32()[0], 1.0f);
  EXPECT_EQ(fa.f32()[1], -2.0f);
  EXPECT_EQ(fb.f32()[0], 7.0f);
}

TEST(Safetensors, TruncatedAnywhereIsRefusedByName) {
  const std::string full = testing::slurp(dir() / "mixed.safetensors");
  for (size_t cut = 0; cut < full.size(); cut += 7) {
    const std::string msg = load_error(full.substr(0, cut));
    // The empty tensor and the last bytes: some cuts only drop data; all must fail.
    EXPECT_NE(msg.find("broken.safetensors"), std::string::npos) << "cut at " << cut << ": " << msg;
  }
}

TEST(Safetensors, LyingHeadersAreRefused) {
  EXPECT_NE(load_error(with_header(R"({"a":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,4]}})", "abcd"))
                .find("needs"),
            std::string::npos);
  EXPECT_NE(load_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,400]}})", "abcd"))
                .find("data section"),
            std::string::npos);
  EXPECT_NE(load_error(with_header(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", "abcd")).find("Q9"),
            std::string::npos);
  EXPECT_NE(load_error(with_header(R"({"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]}})",
                                   "abcd"))
                .find("2^40"),
            std::string::npos);
  EXPECT_NE(load_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                                      "b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                   std::string(12, '\0')))
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(load_error(with_header("{not json", "")).find("header: malformed JSON"), std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(load_error(huge).find("header claims"), std::string::npos);
  EXPECT_NE(load_error("abc").find("shorter"), std::string::npos);
  EXPECT_NE(load_error(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"))
                .find("shape"),
            std::string::npos);
}

TEST(Safetensors, MissingFolderAndDuplicateNames) {
  WeightStore store;
  EXPECT_THROW(load_safetensors_folder("/nonexistent/folder", store), Error);
  load_safetensors_file((dir() / "unaligned.safetensors").string(), store);
  try {
    load_safetensors_file((dir() / "unaligned.safetensors").string(), store);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("defined twice"), std::string::npos);
  }
}

}  // namespace
}  // namespace bonfire
