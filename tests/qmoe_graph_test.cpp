// The QMoE graph ops (ops/moe_qmoe.h, kernels/graph_ops.h): moe with the
// extension layout "qmoe" and the extension op qmoe run ONNX Runtime's QMoE
// through the package runtime. Checked against ORT 1.30's own outputs (the
// committed cases in goldens/qmoe/cases, read with kernels/case_dir.h),
// against each other, and for routing by feature: a graph using them lists
// ext.moe.qmoe / ext.qmoe, and a worker without the feature refuses, naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/executor.h"
#include "kernels/case_dir.h"
#include "kernels/graph_ops.h"
#include "ops/moe_qmoe.h"
#include "ops/op.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kCases = fs::path(BONFIRE_SOURCE_DIR) / "goldens" / "qmoe" / "cases";

Tensor to_tensor(const kernels::Buffer& b) {
  DType d = DType::F32;
  if (b.dtype == "uint8") d = DType::U8;
  else if (b.dtype != "float32") ADD_FAILURE() << "unexpected dtype " << b.dtype;
  auto bytes = std::make_shared<std::vector<uint8_t>>(b.bytes);
  return Tensor::view(d, b.shape, bytes->data(), bytes);
}

// A graph of one node `op` over the case's tensors: input and router_probs
// as call inputs, the four weight roles as weights.
Call case_call(const kernels::CaseDir& c, const std::string& op, const json& params) {
  std::map<std::string, Tensor> inputs, weights;
  json in = json::array();
  for (const char* role : kQmoeRoles) {
    const Tensor t = to_tensor(c.inputs.at(role));
    if (std::string(role) == "input" || std::string(role) == "router_probs") {
      inputs[role] = t;
      in.push_back(role);
    } else {
      weights[role] = t;
      in.push_back(std::string("w:") + role);
    }
  }
  const json call = {{"nodes", {{{"id", "y"}, {"op", op}, {"in", in}, {"params", params}}}}, {"outputs", {"y"}}};
  return Call::parse(call, Limits(), inputs, weights);
}

// The elementwise tolerance of docs/QMOE.md: 1e-4 + 1e-4 |expected|.
void expect_close(const Tensor& got, const kernels::Buffer& want, const std::string& what, double* worst = nullptr) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const float* g = got.f32();
  const float* w = want.as<float>();
  double max_abs = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = std::fabs((double)g[i] - w[i]);
    max_abs = std::max(max_abs, d);
    ASSERT_LE(d, 1e-4 + 1e-4 * std::fabs(w[i])) << what << " element " << i << ": " << g[i] << " vs " << w[i];
  }
  if (worst) *worst = max_abs;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(QmoeGraph, EmbeddedPackageIsTheVendoredFile) {
  EXPECT_EQ(std::string(kernels::qmoe_package_text()), slurp(fs::path(BONFIRE_SOURCE_DIR) / "spec" / "kernels" / "qmoe.json"))
      << "cmake/embed_spec.cmake embeds it at build time";
}

TEST(QmoeGraph, ExtensionOpParamsAreThePackageAttributes) {
  const OpDef* op = find_op("qmoe");
  ASSERT_NE(op, nullptr);
  EXPECT_TRUE(op->extension);
  std::set<std::string> params;
  for (const auto& p : op->params) params.insert(p.name);
  EXPECT_EQ(params, kernels::qmoe_package().attribute_names);
  ASSERT_EQ(kernels::qmoe_package().inputs.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(kernels::qmoe_package().inputs[i].role, kQmoeRoles[i]);
}

// moe layout "qmoe" == the qmoe op == ONNX Runtime, on ORT's own cases:
// 4-bit block-wise (k 4, 7 tokens: the grouped prefill variant), 8-bit
// column-wise (512 tokens), 4-bit block 16 with one token (the decode GEMV).
TEST(QmoeGraph, MoeLayoutQmoeEqualsQmoeOpEqualsOrt) {
  for (const char* name : {"b4_swiglu_blk32_k4_t7_r2", "b8_swiglu_col_k2_t512_r2", "b4_swiglu_blk16_k1_t1_r3"}) {
    SCOPED_TRACE(name);
    kernels::CaseDir c = kernels::load_case((kCases / name).string());
    const kernels::Buffer& want = c.expected_outputs.at("output");
    // moe takes [T, C]; a rank-3 case is the same rows (docs/QMOE.md S1).
    auto& x = c.inputs.at("input");
    const std::vector<int64_t> rank3 = x.shape;
    if (x.shape.size() == 3) x.shape = {x.shape[0] * x.shape[1], x.shape[2]};
    const int64_t k = c.attrs.at("k").get<int64_t>();

    const Call moe = case_call(c, "moe", {{"topK", k}, {"normalize", true}, {"layout", "qmoe"}});
    EXPECT_EQ(moe.graph.features, (std::set<std::string>{"ext.moe.qmoe"}));
    const RunResult a = run_call(moe, nullptr, Limits());
    double worst = 0;
    expect_close(a.outputs.at("y"), want, std::string(name) + " moe layout qmoe", &worst);
    std::printf("[ moe qmoe ] %s: max |bonfire - ORT| = %.3g\n", name, worst);

    x.shape = rank3;
    const Call q = case_call(c, "qmoe", c.attrs);
    EXPECT_EQ(q.graph.features, (std::set<std::string>{"ext.qmoe"}));
    const RunResult b = run_call(q, nullptr, Limits());
    expect_close(b.outputs.at("y"), want, std::string(name) + " qmoe op");
    EXPECT_EQ(b.outputs.at("y").shape, rank3);
    // The same package call: bit-identical.
    ASSERT_EQ(a.outputs.at("y").numel(), b.outputs.at("y").numel());
    EXPECT_EQ(0, std::memcmp(a.outputs.at("y").data, b.outputs.at("y").data, a.outputs.at("y").numel() * 4));
  }
}

TEST(QmoeGraph, FeatureRoutingRefusesWithoutTheFeature) {
  kernels::CaseDir c = kernels::load_case((kCases / "b4_swiglu_blk32_k4_t7_r2").string());
  std::set<std::string> have = implemented_features();
  EXPECT_TRUE(have.count("ext.moe.qmoe"));
  EXPECT_TRUE(have.count("ext.qmoe"));
  for (const auto& [op, params, feature] :
       std::vector<std::tuple<std::string, json, std::string>>{
           {"moe", {{"topK", 4}, {"normalize", true}, {"layout", "qmoe"}}, "ext.moe.qmoe"},
           {"qmoe", c.attrs, "ext.qmoe"}}) {
    const Call call = case_call(c, op, params);
    std::set<std::string> without = have;
    without.erase(feature);
    EXPECT_NO_THROW(require_features(call.graph, have));
    try {
      require_features(call.graph, without);
      ADD_FAILURE() << op << " ran on a worker without " << feature;
    } catch (const Error& e) {
      EXPECT_EQ(e.code, ErrorCode::UnsupportedFeature);
      EXPECT_EQ(e.feature, feature);
      EXPECT_NE(std::string(e.what()).find(feature), std::string::npos) << e.what();
    }
  }
  // Other layouts use no extension feature.
  const json sep = {{"nodes", {{{"id", "y"}, {"op", "moe"}, {"in", {"x", "l", "w:g", "w:u", "w:d"}},
                                {"params", {{"topK", 1}, {"layout", "separate"}}}}}},
                    {"outputs", {"y"}}};
  std::map<std::string, Tensor> in = {{"x", Tensor::zeros({1, 4})}, {"l", Tensor::zeros({1, 1})}};
  EXPECT_TRUE(Call::parse(sep, Limits(), in, {}).graph.features.empty());
}

// An executor whose op table has no QMoE backend (a build without the
// kernels layer) refuses at shape inference, naming the feature.
TEST(QmoeGraph, NoBackendRefusesNamingTheFeature) {
  kernels::CaseDir c = kernels::load_case((kCases / "b4_swiglu_blk32_k4_t7_r2").string());
  const QmoeBackend* saved = qmoe_backend();
  ASSERT_NE(saved, nullptr);
  set_qmoe_backend(nullptr);
  for (const auto& [op, params, feature] :
       std::vector<std::tuple<std::string, json, std::string>>{
           {"moe", {{"topK", 4}, {"normalize", true}, {"layout", "qmoe"}}, "ext.moe.qmoe"},
           {"qmoe", c.attrs, "ext.qmoe"}}) {
    try {
      run_call(case_call(c, op, params), nullptr, Limits());
      ADD_FAILURE() << op << " ran without a backend";
    } catch (const Error& e) {
      EXPECT_EQ(e.code, ErrorCode::UnsupportedFeature) << e.what();
      EXPECT_EQ(e.feature, feature);
    }
  }
  kernels::install_graph_ops();
  EXPECT_EQ(qmoe_backend(), saved);
}

std::string refusal(const kernels::CaseDir& c, const std::string& op, const json& params) {
  try {
    run_call(case_call(c, op, params), nullptr, Limits());
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::BadGraph) << e.what();
    return e.what();
  }
  ADD_FAILURE() << op << " " << params.dump() << " ran";
  return "";
}

TEST(QmoeGraph, RefusalsNameWhatIsWrong) {
  kernels::CaseDir c = kernels::load_case((kCases / "b4_swiglu_blk32_k4_t7_r2").string());
  // moe layout qmoe: ORT's routing is the renormalised softmax over topK.
  EXPECT_NE(refusal(c, "moe", {{"topK", 4}, {"layout", "qmoe"}}).find("normalize"), std::string::npos);
  EXPECT_NE(refusal(c, "moe", {{"topK", 4}, {"normalize", true}, {"layout", "qmoe"}, {"scoring", "sigmoid"}})
                .find("scoring"),
            std::string::npos);
  EXPECT_NE(refusal(c, "moe", {{"topK", 9}, {"normalize", true}, {"layout", "qmoe"}}).find("k"), std::string::npos);
  // The package's own refusals come through, naming the attribute.
  json a = c.attrs;
  a["use_sparse_mixer"] = 1;
  EXPECT_NE(refusal(c, "qmoe", a).find("use_sparse_mixer"), std::string::npos);
  a = c.attrs;
  a["block_size"] = 24;
  EXPECT_NE(refusal(c, "qmoe", a).find("block_size"), std::string::npos);
  a = c.attrs;
  a["frobnicate"] = 1;
  EXPECT_NE(refusal(c, "qmoe", a).find("frobnicate"), std::string::npos);
}

// f16 scales (as checkpoints store them) are widened and give the f32 result
// of the same (rounded) scales.
TEST(QmoeGraph, HalfScalesAreWidened) {
  kernels::CaseDir c = kernels::load_case((kCases / "b4_swiglu_blk32_k4_t7_r2").string());
  std::map<std::string, Tensor> inputs, weights;
  json in = json::array();
  for (const char* role : kQmoeRoles) {
    Tensor t = to_tensor(c.inputs.at(role));
    const std::string r = role;
    if (r == "fc1_scales" || r == "fc2_scales") {
      auto h = std::make_shared<std::vector<uint16_t>>(t.numel());
      auto f = std::make_shared<std::vector<float>>(t.numel());
      for (int64_t i = 0; i < t.numel(); ++i) {
        (*h)[i] = f32_to_f16(t.f32()[i]);
        (*f)[i] = f16_to_f32((*h)[i]);
      }
      weights[r + "_h"] = Tensor::view(DType::F16, t.shape, h->data(), h);
      weights[r] = Tensor::view(DType::F32, t.shape, f->data(), f);
    } else {
      weights[r] = t;
    }
  }
  inputs["input"] = weights.at("input");
  inputs["router_probs"] = weights.at("router_probs");
  auto run = [&](bool half) {
    json ins = {"input", "router_probs", "w:fc1_experts_weights", half ? "w:fc1_scales_h" : "w:fc1_scales",
                "w:fc2_experts_weights", half ? "w:fc2_scales_h" : "w:fc2_scales"};
    const json call = {{"nodes", {{{"id", "y"}, {"op", "qmoe"}, {"in", ins}, {"params", c.attrs}}}}, {"outputs", {"y"}}};
    return run_call(Call::parse(call, Limits(), inputs, weights), nullptr, Limits()).outputs.at("y");
  };
  const Tensor a = run(true), b = run(false);
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(0, std::memcmp(a.data, b.data, a.numel() * 4));
}

}  // namespace
}  // namespace bonfire
