// One whole Llama decoder layer with a KV-cache session, run through the
// real command (`bonfire graph run --session-dir ... --bind pos=...`): a
// prefill of 5 tokens, then 3 decode steps, against PyTorch (goldens/layer).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "golden_util.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

using testing::run_command;

TEST(LlamaLayerCli, PrefillThenDecodeMatchesPyTorch) {
  const fs::path golden = testing::source_dir() / "goldens" / "layer" / "llama_layer.json";
  if (!fs::exists(golden)) GTEST_FAIL() << "missing " << golden;
  const json g = testing::read_json(golden);
  const fs::path dir = fs::temp_directory_path() / ("bonfire_layer_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);

  const auto& steps = g["steps"];
  ASSERT_EQ(steps.size(), 4u);
  for (size_t i = 0; i < steps.size(); ++i) {
    json call = g[i == 0 ? "prefill" : "decode"];
    call["inputs"]["x"] = steps[i]["x"];
    const fs::path file = dir / ("step" + std::to_string(i) + ".json");
    std::ofstream(file) << call.dump();
    const std::string cmd = std::string(BONFIRE_BINARY) + " graph run " + file.string() + " --session-dir " +
                            (dir / "sessions").string() + " --bind pos=" + std::to_string(steps[i]["bind"]["pos"].get<int>());
    auto [out, status] = run_command(cmd);
    ASSERT_EQ(status, 0) << cmd << "\n" << out;
    const json r = json::parse(out);
    EXPECT_TRUE(testing::near(tensor_from_json(r["outputs"]["y"], "y", Limits{}), steps[i]["y"], 1e-4, 1e-4))
        << "step " << i;
  }
  fs::remove_all(dir);
}

TEST(GraphRunCli, ErrorsPrintProtocolJsonAndExit1) {
  const fs::path dir = fs::temp_directory_path() / ("bonfire_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "bad.json";
  std::ofstream(file) << R"({"nodes": [{"id": "y", "op": "nope", "in": []}], "outputs": ["y"]})";
  auto [out, status] = run_command(std::string(BONFIRE_BINARY) + " graph run " + file.string());
  EXPECT_EQ(status, 1);
  const json j = json::parse(out);
  EXPECT_EQ(j["code"], "bad_graph");
  EXPECT_EQ(j["node"], "y");
  EXPECT_TRUE(j["error"].is_string());
  std::ofstream(file) << "{not json";
  std::tie(out, status) = run_command(std::string(BONFIRE_BINARY) + " graph run " + file.string());
  EXPECT_EQ(status, 1);
  EXPECT_EQ(json::parse(out)["code"], "bad_graph");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace bonfire
