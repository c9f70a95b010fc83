// The WebGPU plans of spec/kernels/qmoe.json (kernels/gpu_plan.h): the same
// passes, sizes and buffers as the CPU runtime for every golden case, WGSL
// rendered for every pass, the device-file choices on chromium's SwiftShader
// adapter explained, and failures named. That the WGSL computes QMoE is
// tests/web/webgpu.test.mjs's part (it runs these plans in chromium).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/file.h"
#include "kernels/case_dir.h"
#include "kernels/check.h"
#include "kernels/gpu_ops.h"
#include "kernels/gpu_plan.h"
#include "kernels/qmoe_problem.h"
#include "kernels/runtime.h"
#include "kernels/select.h"
#include "kernels/wgsl_templates.h"
#include "model/wgsl_renderer.h"

namespace bonfire::kernels {
namespace {

using json = nlohmann::json;
using testing::qmoe_package;
using testing::qmoe_problem;
using testing::test_device;

std::vector<std::string> output_cases() {
  const json index = json::parse(read_file(testing::source_path("goldens/qmoe/cases/INDEX.json")));
  std::vector<std::string> out;
  for (const auto& c : index["cases"])
    if (c["kind"] == "output") out.push_back(testing::source_path("goldens/qmoe/cases/" + c["name"].get<std::string>()));
  return out;
}

// For every golden case and every variant that applies on SwiftShader: the
// plan has the runtime's dispatches (one per pass call, repeat blocks
// unrolled) and its buffers, and every shader rendered to WGSL.
TEST(GpuPlan, EveryCaseAndVariantMatchesTheRuntime) {
  const Package& pkg = qmoe_package();
  const Device device = test_device("swiftshader");
  std::map<std::string, int> planned;
  for (const std::string& dir : output_cases()) {
    CaseDir c = load_case(dir);
    const Bound bound = check_problem(pkg, problem_of(c.attrs, c.inputs), device);
    const Selection s = select_variant(pkg, bound, device);
    for (size_t v = 0; v < s.variants.size(); ++v) {
      if (!s.variants[v].failed.is_null()) continue;
      const GpuPlan plan = plan_gpu(pkg, bound, device, (int)v, render_wgsl);
      std::map<std::string, Buffer> buffers = c.inputs;
      const RunReport r = run_variant(pkg, bound, device, (int)v, buffers);
      EXPECT_EQ((int64_t)plan.dispatches.size(), r.pass_calls) << dir << " " << plan.variant;
      std::set<std::string> ids;
      for (const auto& b : plan.buffers) ids.insert(b.id);
      for (const auto& [role, b] : c.inputs) EXPECT_TRUE(ids.count(role)) << role;
      EXPECT_TRUE(ids.count("output"));
      for (const auto& im : pkg.variants[v].intermediates) EXPECT_TRUE(ids.count(im.id)) << im.id;
      for (const auto& d : plan.dispatches) {
        for (int64_t n : d.workgroups) EXPECT_LE(n, 65535) << d.pass;
        const std::string& wgsl = plan.shaders.at(d.shader);
        EXPECT_NE(wgsl.find("@compute"), std::string::npos) << d.shader;
        EXPECT_EQ(wgsl.find("{{"), std::string::npos) << d.shader;
        EXPECT_EQ(wgsl.find("{%"), std::string::npos) << d.shader;
        EXPECT_EQ(wgsl.find("//! include"), std::string::npos) << d.shader;
        EXPECT_EQ(d.bindings.back().name, "dispatchInfo");
      }
      ++planned[plan.variant];
    }
  }
  // SwiftShader has subgroups but no subgroup matrices: the three routed
  // variants are each planned for some case...
  for (const char* v : {"quant_grouped_routed", "quant_gemv_routed", "quant_split_routed"})
    EXPECT_GT(planned[v], 0) << v;
  EXPECT_EQ(planned.count("quant_grouped_sgmat_routed"), 0u);
  // ...and no golden case has an empty intermediate size: one pass of
  // ceilDiv(3 * 64, 64) workgroups zeroes the output.
  const Bound zero = check_problem(pkg, qmoe_problem({64, 0, 4, 2}, 3, {4, 0, false}), device);
  const Selection s = select_variant(pkg, zero, device);
  ASSERT_GE(s.chosen, 0);
  const GpuPlan plan = plan_gpu(pkg, zero, device, s.chosen, render_wgsl);
  EXPECT_EQ(plan.variant, "quant_zero_inter");
  ASSERT_EQ(plan.dispatches.size(), 1u);
  EXPECT_EQ(plan.dispatches[0].workgroups, (std::array<int64_t, 3>{3, 1, 1}));
}

// Every shader a variant names has a template, except the subgroup-matrix
// variant's two (no adapter here offers subgroup matrices to test them on).
TEST(GpuPlan, TemplatesForEveryPassButSubgroupMatrices) {
  std::set<std::string> have;
  for (const auto& n : wgsl_template_names()) have.insert(n);
  std::set<std::string> missing;
  std::function<void(const std::vector<Pass>&)> walk = [&](const std::vector<Pass>& passes) {
    for (const Pass& s : passes) {
      if (s.is_repeat()) walk(s.passes);
      else if (!have.count(s.shader)) missing.insert(s.shader);
    }
  };
  for (const auto& v : qmoe_package().variants) walk(v.passes);
  EXPECT_EQ(missing, (std::set<std::string>{"qmoe-fc1-activation-grouped-sgmat.wgsl.jinja",
                                            "qmoe-output-grouped-sgmat.wgsl.jinja"}));
  // Includes are expanded; a missing template is named.
  const std::string route = wgsl_template("qmoe-route-stage.wgsl.jinja");
  EXPECT_NE(route.find("fn is_nan"), std::string::npos);
  EXPECT_EQ(route.find("//! include"), std::string::npos);
  try {
    wgsl_template("nope.wgsl.jinja");
    ADD_FAILURE() << "a missing template was found";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.wgsl.jinja"), std::string::npos);
  }
}

// A template that fails to render: UnsupportedFeature naming the variant,
// the pass and the shader, so the worker can fall back to the CPU.
TEST(GpuPlan, RenderFailureNamesThePass) {
  const Device device = test_device("swiftshader");
  const Bound bound = check_problem(qmoe_package(), qmoe_problem({64, 64, 4, 2}, 1, {4, 0, false}), device);
  const Selection s = select_variant(qmoe_package(), bound, device);
  ASSERT_GE(s.chosen, 0);
  try {
    plan_gpu(qmoe_package(), bound, device, s.chosen,
             [](const std::string&, const nlohmann::ordered_json&) -> std::string { throw Error(ErrorCode::BadGraph, "boom"); });
    ADD_FAILURE() << "planned without a renderer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::UnsupportedFeature);
    const std::string m = e.what();
    EXPECT_NE(m.find("pass route_stage (QMoE.RouteStage, qmoe-route-stage.wgsl.jinja)"), std::string::npos) << m;
    EXPECT_NE(m.find("boom"), std::string::npos) << m;
  }
}

// A {threads} dispatch over the device's workgroups per dimension is folded
// into y; the shader learns the fold from dispatchInfo.
TEST(GpuPlan, ThreadDispatchesFoldIntoY) {
  json dj = json::parse(read_file(testing::source_path("tests/kernels/devices/swiftshader.json")));
  dj["limits"]["maxComputeWorkgroupsPerDimension"] = 16;
  const Device device = parse_device(dj, "few-workgroups");
  const Bound bound = check_problem(qmoe_package(), qmoe_problem({64, 64, 4, 2}, 64, {4, 0, false}), device);
  int split = -1;
  for (size_t i = 0; i < qmoe_package().variants.size(); ++i)
    if (qmoe_package().variants[i].id == "quant_split_routed") split = (int)i;
  const GpuPlan plan = plan_gpu(qmoe_package(), bound, device, split, render_wgsl);
  // fc1: 64 tokens * k 2 * inter 64 = 8192 threads / 64 = 128 workgroups -> 16 x 8.
  const GpuDispatch& fc1 = plan.dispatches.at(1);
  EXPECT_EQ(fc1.pass, "fc1_activation_stage");
  EXPECT_EQ(fc1.workgroups, (std::array<int64_t, 3>{16, 8, 1}));
  EXPECT_EQ(fc1.bindings.back().words, (std::vector<uint32_t>{8192, 16, 0, 0}));
}

// `kernel select` on chromium's SwiftShader adapter and on one without
// subgroups: the subgroup-matrix variant is refused naming the feature that
// decided; a binding limit too small for the prefill activations refuses
// the grouped form naming the limit's condition.
TEST(GpuPlan, SwiftShaderChoicesExplained) {
  const Problem prefill = qmoe_problem(testing::kQwenMoe, 512);
  auto pick = [&](const Device& d) { return select_variant(qmoe_package(), check_problem(qmoe_package(), prefill, d), d); };
  auto failed = [](const Selection& s, const std::string& id) {
    for (const auto& r : s.variants)
      if (r.id == id) return r.failed;
    return json();
  };
  const Selection sw = pick(test_device("swiftshader"));
  EXPECT_EQ(sw.variants[sw.chosen].id, "quant_grouped_routed");
  EXPECT_EQ(failed(sw, "quant_grouped_sgmat_routed"), json({{"feature", "chromium-experimental-subgroup-matrix"}}));
  const Selection none = pick(test_device("swiftshader_no_subgroups"));
  EXPECT_EQ(none.variants[none.chosen].id, "quant_grouped_routed");
  EXPECT_EQ(failed(none, "quant_grouped_sgmat_routed"), json({{"feature", "subgroups"}}));

  json dj = json::parse(read_file(testing::source_path("tests/kernels/devices/swiftshader.json")));
  dj["limits"]["maxStorageBufferBindingSize"] = 4 << 20;  // 4 MiB
  const Selection small = pick(parse_device(dj, "small-bindings"));
  const json g = failed(small, "quant_grouped_routed");
  ASSERT_TRUE(g.is_object());
  EXPECT_EQ(g["condition"], "groupedContract");
  EXPECT_EQ(g["because"].front(), "groupSlotOutFits") << g;
  EXPECT_EQ(small.variants[small.chosen].id, "quant_gemv_routed");
}

}  // namespace
}  // namespace bonfire::kernels

namespace bonfire::kernels {
namespace {

// Graph ops on WebGPU (kernels/gpu_ops.h): shapes as the CPU op infers
// them, and what the kernels cannot do refused as UnsupportedFeature naming
// it (the caller runs that node on the CPU), what the op refuses as BadGraph.
TEST(GpuOps, PlansAndRefusals) {
  const Device device = test_device("swiftshader");
  const nlohmann::json none = nlohmann::json::object();
  GpuPlan p = plan_gpu_node("matmul", {{"transB", true}}, {{"a", "float32", {2, 3, 64}}, {"w", "q4_0", {5, 64}}}, "y",
                            device, render_wgsl);
  EXPECT_EQ(p.buffers.back().shape, (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(p.buffers[1].bytes, 5 * 2 * 18);
  EXPECT_NE(p.shaders.begin()->second.find("weight_f16(block)"), std::string::npos);
  p = plan_gpu_node("add", none, {{"a", "float32", {2, 3, 4}}, {"b", "float32", {4}}}, "y", device, render_wgsl);
  EXPECT_EQ(p.buffers.back().shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(p.dispatches[0].bindings.back().words[0], 24u);

  auto refusal = [&](const std::string& op, const nlohmann::json& params, const std::vector<GpuValue>& in) {
    try {
      plan_gpu_node(op, params, in, "y", device, render_wgsl);
    } catch (const Error& e) {
      return std::pair<ErrorCode, std::string>{e.code, e.what()};
    }
    return std::pair<ErrorCode, std::string>{ErrorCode::Internal, "(planned)"};
  };
  auto r = refusal("softmax", none, {{"x", "float32", {1, 8}}});
  EXPECT_EQ(r.first, ErrorCode::UnsupportedFeature);
  EXPECT_NE(r.second.find("softmax has no GPU kernel here"), std::string::npos) << r.second;
  r = refusal("attention", {{"heads", 2}, {"headDim", 4}, {"alibi", true}},
              {{"q", "float32", {1, 8}}, {"k", "float32", {3, 8}}, {"v", "float32", {3, 8}}});
  EXPECT_EQ(r.first, ErrorCode::UnsupportedFeature);
  EXPECT_NE(r.second.find("param alibi has no GPU kernel here"), std::string::npos) << r.second;
  // rope carries the CPU op's cos/sin tables: [rows, rotaryDim / 2] each.
  p = plan_gpu_node("rope", {{"headDim", 8}, {"offset", 3}}, {{"x", "float32", {2, 16}}}, "y", device, render_wgsl);
  int tables = 0;
  for (const auto& b : p.buffers)
    if (b.kind == "constant") {
      EXPECT_EQ(b.words.size(), 2u * 4u) << b.id;
      ++tables;
    }
  EXPECT_EQ(tables, 2);
  r = refusal("rmsnorm", {{"eps", "pos"}}, {{"x", "float32", {1, 8}}, {"g", "float32", {8}}});
  EXPECT_EQ(r.first, ErrorCode::UnsupportedFeature);
  EXPECT_NE(r.second.find("bind expression \"pos\""), std::string::npos) << r.second;
  r = refusal("matmul", {{"transB", true}}, {{"a", "float32", {1, 64}}, {"w", "q4_k", {5, 64}}});
  EXPECT_EQ(r.first, ErrorCode::UnsupportedFeature);
  EXPECT_NE(r.second.find("q4_k"), std::string::npos) << r.second;
  r = refusal("add", none, {{"a", "float32", {2, 3}}, {"b", "float32", {4}}});
  EXPECT_EQ(r.first, ErrorCode::BadGraph);
  EXPECT_NE(r.second.find("do not broadcast"), std::string::npos) << r.second;
  r = refusal("matmul", none, {{"a", "float32", {1, 8}}, {"w", "float32", {9, 4}}});
  EXPECT_EQ(r.first, ErrorCode::BadGraph);
}

}  // namespace
}  // namespace bonfire::kernels
