// Which QMoE variant spec/kernels/qmoe.json picks, checked against choices
// computed by hand from the package's own expressions (the arithmetic is in
// the comments), and every refusal of an attribute, dtype or shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/file.h"
#include "golden_util.h"
#include "kernels/check.h"
#include "kernels/qmoe_problem.h"
#include "kernels/select.h"

namespace bonfire::kernels {
namespace {

using json = nlohmann::json;
using testing::kOlmoe;
using testing::kQwenMoe;
using testing::qmoe_package;
using testing::qmoe_problem;
using testing::QmoeOptions;
using testing::test_device;

Selection pick(const Problem& pr, const std::string& device) {
  const Device d = test_device(device);
  return select_variant(qmoe_package(), check_problem(qmoe_package(), pr, d), d);
}

std::string chosen(const Problem& pr, const std::string& device) {
  const Selection s = pick(pr, device);
  return s.chosen < 0 ? "(none)" : s.variants[s.chosen].id;
}

const VariantReport& report(const Selection& s, const std::string& id) {
  for (const auto& r : s.variants)
    if (r.id == id) return r;
  throw std::runtime_error("no variant " + id);
}

// Shared arithmetic (tunables): workgroupSize 64, decodeLanes 32, so
// decodeRows = 64 / 32 = 2; groupThreads 8, groupRegM 4 → groupTileM = 32,
// groupThreadCount = 64; groupSharedBytes = (32·16 + 2·32·16 + 32)·4 = 6272;
// groupedSgmatSharedBytes = 32·4 + 32·32·4 + 64·32·4 + 4·4·64·4 = 16512.
//
// Qwen-MoE-like: H 2048, I 1408, E 60, k 4, SwiGLU (fc1 rows 2816, fusion 2).
// OLMoE-like:    H 2048, I 1024, E 64, k 8, SwiGLU (fc1 rows 2048).

// ---- decode, T = 1 ------------------------------------------------------
// groupedShapeOk: numTokens·topK·4 >= groupTileM·E
//   Qwen: 1·4·4 = 16 >= 32·60 = 1920 false; OLMoE: 1·8·4 = 32 >= 2048 false
// so groupedContract (and groupedSgmatOk) fail on every device.
// decodeContract, cpu (limits 1024/1024/1024, storage 32768, per-dim 2^31-1, buffers 2^30):
//   decodeDeviceOk: 64 <= min(1024, 1024); lanes 32 <= 64, 64 % 32 == 0; 32 <= 1024; rows 2 <= 1024; 64·8 = 512 <= 32768
//   hiddenChunkTokens = min(1, max(1, floor(2^30 / (4·1408·4 = 22528)))) = 1
//   decodeDispatchOk: ceilDiv(1408, 2) = 704, ceilDiv(2048, 2) = 1024, 1·4 = 4, all <= 2^31-1
//   hiddenChunkFits: 22528 <= 2^30; routedScratchFits: 1·4·4 = 16
//   decodeDepthOk: min(2048, 1408) / 32 = 44 >= 4 (OLMoE: 1024 / 32 = 32)
//   decodeOccupancyOk: ceilDiv(1·4·1408, 64) = 88 <= 1024 (OLMoE: ceilDiv(8192, 64) = 128)
// → quant_gemv_routed (20) beats quant_split_routed (10); zero_inter needs interSize == 0.
// The GPUs (per-dim 65535) pass the same: 704, 1024 and 4 (OLMoE 512, 1024, 8) <= 65535.
// small (128 invocations, storage 16384, bindings 8 MiB): 64 <= 128; 32 <= 128; 2 <= 128;
//   512 <= 16384; hiddenChunkFits 22528 <= 8388608 (OLMoE 8·1024·4 = 32768) → gemv too.
TEST(KernelSelect, DecodePicksGemvOnEveryDevice) {
  for (const char* dev : {"cpu", "gpu_sgmat", "gpu_subgroups", "small"}) {
    EXPECT_EQ(chosen(qmoe_problem(kQwenMoe, 1), dev), "quant_gemv_routed") << dev;
    EXPECT_EQ(chosen(qmoe_problem(kOlmoe, 1), dev), "quant_gemv_routed") << dev;
  }
}

// ---- prefill, T = 512 ---------------------------------------------------
// cpu, Qwen: hiddenChunkTokens = min(512, floor(2^30 / 22528) = 47662) = 512
//   groupedDeviceOk: 64 <= 1024; 8 <= 1024 (X, Y); 256 <= 1024; 6272 <= 32768; 60·8 = 480 <= 32768; 16 % 4 == 0
//   groupMaxTiles = ceilDiv(512·4, 32) + 60 = 64 + 60 = 124; ceilDiv(1408, 32) = 44; ceilDiv(2048, 32) = 64
//   groupSlotOutBytes = 512·4·2048·4 = 16777216 <= 2^30; groupedShapeOk: 512·4·4 = 8192 >= 1920
//   → groupedContract; sgmat needs the feature "subgroups" → quant_grouped_routed (30).
//   gemv: decodeOccupancyOk: ceilDiv(512·4·1408, 64) = 45056 > 1024 and groupedContract holds → false.
// cpu, OLMoE: hiddenChunkTokens = min(512, floor(2^30 / 32768)) = 512; groupMaxTiles = 128 + 64 = 192;
//   groupSlotOutBytes = 512·8·2048·4 = 33554432 <= 2^30; 512·8·4 = 16384 >= 32·64 = 2048 → grouped.
TEST(KernelSelect, PrefillOnCpuPicksGrouped) {
  EXPECT_EQ(chosen(qmoe_problem(kQwenMoe, 512), "cpu"), "quant_grouped_routed");
  EXPECT_EQ(chosen(qmoe_problem(kOlmoe, 512), "cpu"), "quant_grouped_routed");
  const Selection s = pick(qmoe_problem(kQwenMoe, 512), "cpu");
  EXPECT_EQ(report(s, "quant_grouped_sgmat_routed").failed, json({{"feature", "subgroups"}}));
  EXPECT_EQ(report(s, "quant_gemv_routed").failed["condition"], "decodeContract");
  EXPECT_EQ(report(s, "quant_gemv_routed").failed["because"].back(), "decodeOccupancyOk or not groupedContract");
  EXPECT_EQ(report(s, "quant_zero_inter").failed["condition"], "interSize == 0");
  EXPECT_TRUE(report(s, "quant_split_routed").failed.is_null());  // applies, lower priority
}

// gpu_sgmat (buffers 2 GiB / 4 GiB, per-dim 65535), Qwen: hiddenChunkTokens = min(512,
//   floor(2^31 / 22528) = 95325) = 512; groupedContract as on cpu (124, 44, 64 <= 65535; 16 MiB <= 2 GiB);
//   groupedSgmatOk: groupTileM 32 == 32; 1408 % 32 = 0 (44·32); 16512 <= 32768; ceilDiv(2048, 64) = 32 <= 65535;
//   2048 % 32 = 0. wave32Effective: subgroupMinSize == subgroupMaxSize == 32.
//   requires: subgroups, subgroup matrix, 32768 >= 16512, f32 8x8x8 offered → quant_grouped_sgmat_routed (32).
// OLMoE: 1024 % 32 = 0, groupMaxTiles 192, slotOut 32 MiB → sgmat too.
// gpu_subgroups: no "chromium-experimental-subgroup-matrix" → quant_grouped_routed (30).
TEST(KernelSelect, PrefillOnGpus) {
  EXPECT_EQ(chosen(qmoe_problem(kQwenMoe, 512), "gpu_sgmat"), "quant_grouped_sgmat_routed");
  EXPECT_EQ(chosen(qmoe_problem(kOlmoe, 512), "gpu_sgmat"), "quant_grouped_sgmat_routed");
  EXPECT_EQ(chosen(qmoe_problem(kQwenMoe, 512), "gpu_subgroups"), "quant_grouped_routed");
  EXPECT_EQ(chosen(qmoe_problem(kOlmoe, 512), "gpu_subgroups"), "quant_grouped_routed");
  const Selection s = pick(qmoe_problem(kQwenMoe, 512), "gpu_subgroups");
  EXPECT_EQ(report(s, "quant_grouped_sgmat_routed").failed,
            json({{"feature", "chromium-experimental-subgroup-matrix"}}));
}

// small, Qwen: hiddenChunkTokens = min(512, floor(min(8388608, 16777216) / 22528) = 372) = 372,
//   hiddenChunkCount = ceilDiv(512, 372) = 2.
//   groupedDeviceOk: 256 <= deviceWorkgroupCap = min(128, 128) is false (and groupSlotOutBytes =
//   372·4·2048·4 = 12189696 > 8388608) → no grouped variant.
//   decodeContract: decodeDispatchOk 372·4 = 1488 <= 65535; occupancy 45056 > 1024 but not
//   groupedContract → quant_gemv_routed (20), in 2 token chunks.
// small, OLMoE: hiddenChunkTokens = min(512, floor(8388608 / 32768) = 256) = 256, 2 chunks;
//   256·8 = 2048 <= 65535 → quant_gemv_routed.
TEST(KernelSelect, PrefillOnSmallDeviceChunksGemv) {
  const Device d = test_device("small");
  for (const auto& [size, chunk_tokens] : {std::pair{kQwenMoe, 372}, std::pair{kOlmoe, 256}}) {
    const Bound b = check_problem(qmoe_package(), qmoe_problem(size, 512), d);
    const Selection s = select_variant(qmoe_package(), b, d);
    ASSERT_GE(s.chosen, 0);
    EXPECT_EQ(s.variants[s.chosen].id, "quant_gemv_routed");
    const auto& g = report(s, "quant_grouped_routed").failed;
    EXPECT_EQ(g["condition"], "groupedContract");
    EXPECT_EQ(g["because"], json({"groupedDeviceOk", "tunables.groupRouteWorkgroup <= deviceWorkgroupCap"}));
    Scope scope(qmoe_package(), b, d);
    EXPECT_EQ(scope.value("hiddenChunkTokens"), chunk_tokens);
    EXPECT_EQ(scope.value("hiddenChunkCount"), 2);
  }
  // The sgmat variant is refused for the missing feature, by name.
  const Selection s = pick(qmoe_problem(kQwenMoe, 512), "small");
  EXPECT_EQ(report(s, "quant_grouped_sgmat_routed").failed, json({{"feature", "subgroups"}}));
}

// Tiny experts, H = I = 64, E 4, k 2, ReLU, T = 1, cpu:
//   groupedShapeOk: 1·2·4 = 8 >= 32·4 = 128 false; decodeDepthOk: min(64, 64) / 32 = 2 >= 4 false
//   → quant_split_routed (10). At T = 512: 512·2·4 = 4096 >= 128 → quant_grouped_routed.
// No inter size (fc1 [4, 0, 32], fc2 [4, 64, 0]): interSize = 0 → quant_zero_inter (20); every
//   other variant needs interSize > 0.
TEST(KernelSelect, SplitAndZeroInter) {
  const testing::MoeSize tiny{64, 64, 4, 2};
  const QmoeOptions relu{4, 0, false};
  EXPECT_EQ(chosen(qmoe_problem(tiny, 1, relu), "cpu"), "quant_split_routed");
  EXPECT_EQ(chosen(qmoe_problem(tiny, 512, relu), "cpu"), "quant_grouped_routed");
  EXPECT_EQ(chosen(qmoe_problem({64, 0, 4, 2}, 3, relu), "cpu"), "quant_zero_inter");
}

// Rank-3 input, 8-bit weights and block-wise scales change no choice: the
// same arithmetic with numTokens = 1·512 and packSize 1.
TEST(KernelSelect, Rank3EightBitBlockwise) {
  EXPECT_EQ(chosen(qmoe_problem(kQwenMoe, 512, {8, 0, true, true}), "cpu"), "quant_grouped_routed");
  EXPECT_EQ(chosen(qmoe_problem(kQwenMoe, 1, {4, 128, true, true}), "cpu"), "quant_gemv_routed");
  EXPECT_EQ(chosen(qmoe_problem(kOlmoe, 512, {4, 32, true}), "gpu_sgmat"), "quant_grouped_sgmat_routed");
}

// A device without a limit a when entry reads: the variant fails with the
// error naming the limit, it is not a crash.
TEST(KernelSelect, ExplainLimitsAndMissingLimits) {
  json dj = json::parse(read_file(testing::source_path("tests/kernels/devices/gpu_sgmat.json")));
  dj["limits"]["maxComputeWorkgroupStorageSize"] = 16384;
  const Device d = parse_device(dj, "low-storage");
  const Bound b = check_problem(qmoe_package(), qmoe_problem(kQwenMoe, 512), d);
  Selection s = select_variant(qmoe_package(), b, d);
  EXPECT_EQ(report(s, "quant_grouped_sgmat_routed").failed,
            json({{"limit", "maxComputeWorkgroupStorageSize"}, {"need", 16512}, {"have", 16384}}));
  EXPECT_EQ(s.variants[s.chosen].id, "quant_grouped_routed");

  dj["limits"].erase("maxBufferSize");
  const Device d2 = parse_device(dj, "no-max-buffer");
  s = select_variant(qmoe_package(), b, d2);
  const json& f = report(s, "quant_split_routed").failed;
  EXPECT_EQ(f["condition"], "hiddenChunkFits");
  EXPECT_NE(f["error"].get<std::string>().find("unknown name 'device.limits.maxBufferSize'"), std::string::npos) << f;
  EXPECT_LT(s.chosen, 0);
}

// ---- refusals -----------------------------------------------------------

std::string refusal(Problem pr) {
  try {
    check_problem(qmoe_package(), pr, test_device("cpu"));
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::BadGraph);
    return e.what();
  }
  return "(accepted)";
}

Problem with(Problem p, const std::string& attr, const json& v) {
  p.attrs[attr] = v;
  return p;
}

TEST(KernelSelect, AttributeConstraintsRefuseNamingTheAttribute) {
  const Problem p = qmoe_problem(kQwenMoe, 4);
  EXPECT_EQ(refusal(with(p, "use_sparse_mixer", 1)), "use_sparse_mixer: 1 is not allowed (allowed: 0)");
  EXPECT_EQ(refusal(with(p, "weights_prepacked", 1)), "weights_prepacked: 1 is not allowed (allowed: -1, 0)");
  EXPECT_EQ(refusal(with(p, "quant_type", "fp4")), "quant_type: \"fp4\" is not allowed (allowed: \"int\")");
  EXPECT_EQ(refusal(with(p, "expert_weight_bits", 2)), "expert_weight_bits: 2 is not allowed (allowed: 4, 8)");
  EXPECT_EQ(refusal(with(p, "activation_type", "gelu")),
            "activation_type: \"gelu\" is not allowed (allowed: \"relu\", \"swiglu\")");
  EXPECT_EQ(refusal(with(p, "normalize_routing_weights", 2)),
            "normalize_routing_weights: 2 is not allowed (allowed: 0, 1)");
  EXPECT_EQ(refusal(with(p, "swiglu_fusion", 2)), "swiglu_fusion: 2 is not allowed (allowed: 0, 1)");
  EXPECT_EQ(refusal(with(p, "k", "2")), "k: \"2\" is not a number (the default is 1)");
  EXPECT_EQ(refusal(with(p, "activation_type", 1)), "activation_type: 1 is not a string (the default is \"relu\")");
  EXPECT_EQ(refusal(with(p, "frobnicate", 1)).rfind("frobnicate: not an attribute of QMoE", 0), 0u);
  // Allowed values compare as numbers: 0.0 is 0.
  EXPECT_EQ(refusal(with(p, "use_sparse_mixer", 0.0)), "(accepted)");
}

TEST(KernelSelect, ContractRefusesNamingTheAttribute) {
  const Problem p = qmoe_problem(kQwenMoe, 4);
  // relu with swiglu_fusion 1 (ORT returns garbage): activationSupported is false.
  std::string m = refusal(with(p, "activation_type", "relu"));
  EXPECT_EQ(m.rfind("activation_type = \"relu\", swiglu_fusion = 1: refused by QMoE's contract: quantContract -> "
                    "activationSupported: ",
                    0),
            0u)
      << m;
  // swiglu without the interleaved packing.
  m = refusal(with(p, "swiglu_fusion", 0));
  EXPECT_EQ(m.rfind("activation_type = \"swiglu\", swiglu_fusion = 0:", 0), 0u) << m;
  // k out of range: "topK >= 1" and "topK <= dim(shapes.router_probs, 1)".
  m = refusal(with(p, "k", 0));
  EXPECT_EQ(m, "k = 0: refused by QMoE's contract: quantContract: \"topK >= 1\" is false");
  m = refusal(with(p, "k", 61));
  EXPECT_EQ(m, "k = 61, router_probs [4, 60]: refused by QMoE's contract: quantContract: "
               "\"topK <= dim(shapes.router_probs, 1)\" is false");
  // Block sizes: below 16, not a power of two, not dividing inter (1408 % 256 = 128).
  for (int block : {8, 24, 256}) {
    Problem b = qmoe_problem(kQwenMoe, 4, {4, 0, true});
    b.attrs["block_size"] = block;
    b.shapes["fc1_scales"] = {60, 2816, 2048 / block};
    b.shapes["fc2_scales"] = {60, 2048, 1408 / block};
    m = refusal(b);
    EXPECT_EQ(m.rfind("block_size = " + std::to_string(block) + ", ", 0), 0u) << m;
    EXPECT_NE(m.find("quantContract -> quantShapeOk -> quantBlockSizeOk"), std::string::npos) << m;
  }
  // 128 divides both (2048 = 16·128, 1408 = 11·128): accepted.
  EXPECT_EQ(refusal(qmoe_problem(kQwenMoe, 4, {4, 128, true})), "(accepted)");
}

TEST(KernelSelect, TensorsRefusedByName) {
  Problem p = qmoe_problem(kQwenMoe, 4);
  Problem q = p;
  q.dtypes["input"] = "float16";
  EXPECT_EQ(refusal(q), "input: dtype float16 is not allowed for T (allowed: float32)");
  q = p;
  q.dtypes["fc1_experts_weights"] = "float32";
  EXPECT_EQ(refusal(q), "fc1_experts_weights: dtype float32 is not allowed for T1 (allowed: uint8)");
  q = p;
  q.shapes["router_probs"] = {1, 4, 60};
  EXPECT_EQ(refusal(q), "router_probs: rank 3 (shape [1, 4, 60]), the package needs rank 2");
  q = p;
  q.shapes.erase("fc2_scales");
  EXPECT_EQ(refusal(q), "fc2_scales: missing (an input of QMoE)");
  q = p;
  q.shapes["router_weights"] = {4, 60};
  EXPECT_EQ(refusal(q).rfind("router_weights: not a tensor of QMoE", 0), 0u);
  // fc1 packed columns that are not hidden / 2: quantShapeOk names the tensors it compares.
  q = p;
  q.shapes["fc1_experts_weights"] = {60, 2816, 2048};
  std::string m = refusal(q);
  EXPECT_NE(m.find("fc1_experts_weights [60, 2816, 2048]"), std::string::npos) << m;
  EXPECT_NE(m.find("quantContract -> quantShapeOk: \"dim(shapes.fc1_experts_weights, 2) * packSize == hiddenSize\""),
            std::string::npos)
      << m;
  // An output shape that disagrees with the input.
  q = p;
  q.shapes["output"] = {4, 1024};
  m = refusal(q);
  EXPECT_NE(m.find("output [4, 1024]"), std::string::npos) << m;
  EXPECT_NE(m.find("quantShapeOk -> inputOutputShapeOk"), std::string::npos) << m;
}

// ---- the command line ---------------------------------------------------

std::string cli(const std::string& args, int* status) {
  const auto [out, st] = bonfire::testing::run_command(std::string(BONFIRE_BINARY) + " kernel " + args + " 2>&1");
  *status = st;
  return out;
}

TEST(KernelSelect, CommandPrintsChoiceAndExplanation) {
  const std::string pkg = testing::source_path("spec/kernels/qmoe.json");
  const std::string shapes =
      R"('{"input": [512, 2048], "router_probs": [512, 60], "fc1_experts_weights": [60, 2816, 1024],)"
      R"( "fc1_scales": [60, 2816], "fc2_experts_weights": [60, 2048, 704], "fc2_scales": [60, 2048]}')";
  const std::string attrs = R"('{"k": 4, "activation_type": "swiglu", "swiglu_fusion": 1}')";
  int st = 0;
  json out = json::parse(cli("select " + pkg + " --shapes " + shapes + " --attrs " + attrs, &st));
  EXPECT_EQ(st, 0);
  EXPECT_EQ(out["variant"], "quant_grouped_routed");
  ASSERT_EQ(out["variants"].size(), 5u);
  EXPECT_EQ(out["variants"][1]["id"], "quant_grouped_sgmat_routed");
  EXPECT_EQ(out["variants"][1]["failed"], json({{"feature", "subgroups"}}));
  EXPECT_EQ(out["variants"][2]["selected"], true);

  out = json::parse(cli("select " + pkg + " --shapes " + shapes + " --attrs " + attrs + " --device " +
                            testing::source_path("tests/kernels/devices/gpu_sgmat.json"),
                        &st));
  EXPECT_EQ(out["variant"], "quant_grouped_sgmat_routed");

  out = json::parse(cli("select " + pkg + " --shapes " + shapes +
                            R"( --attrs '{"k": 4, "activation_type": "swiglu", "swiglu_fusion": 1, "use_sparse_mixer": 1}')",
                        &st));
  EXPECT_EQ(st, 1);
  EXPECT_EQ(out["error"], "use_sparse_mixer: 1 is not allowed (allowed: 0)");
  EXPECT_EQ(out["code"], "bad_graph");
}

// A case whose expected outcome is a refusal: exit status 1, the error JSON
// with whether the message names the expected attribute.
TEST(KernelSelect, RunCommandRefusesExpectedErrorCases) {
  const auto dir = std::filesystem::temp_directory_path() / "bonfire_kernel_run_refusal";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto zeros = [](const std::string& dtype, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return json{{"dtype", dtype}, {"shape", shape}, {"data", std::vector<int>((size_t)n, 0)}};
  };
  json c = {{"op", "QMoE"},
            {"attributes", {{"k", 1}, {"use_sparse_mixer", 1}}},
            {"inputs",
             {{"input", zeros("float32", {1, 32})},
              {"router_probs", zeros("float32", {1, 2})},
              {"fc1_experts_weights", zeros("uint8", {2, 32, 16})},
              {"fc1_scales", zeros("float32", {2, 32})},
              {"fc2_experts_weights", zeros("uint8", {2, 32, 16})},
              {"fc2_scales", zeros("float32", {2, 32})}}},
            {"expected", {{"error", "use_sparse_mixer"}}}};
  std::ofstream((dir / "case.json").string()) << c.dump();
  const std::string pkg = testing::source_path("spec/kernels/qmoe.json");
  int st = 0;
  json out = json::parse(cli("run " + pkg + " --case " + dir.string(), &st));
  EXPECT_EQ(st, 1);
  EXPECT_EQ(out["error"], "use_sparse_mixer: 1 is not allowed (allowed: 0)");
  EXPECT_EQ(out["names_expected"], true);
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "output.bin"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bonfire::kernels
