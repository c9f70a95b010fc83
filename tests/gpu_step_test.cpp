// Step programs (kernels/gpu_step.h) for the demo model's generation steps,
// as the browser worker's WebGPU runner gets them; the runner's arithmetic is
// checked in chromium (tests/web/webgpu.test.mjs, "f"). Here: which nodes go
// to the GPU, how values are named, and that a session tensor held on a
// device is planned by its shape but never read by the CPU engine.
#include <gtest/gtest.h>

#include "core/error.h"
#include "graph/executor.h"
#include "ir/generation.h"
#include "ir/lower.h"
#include "kernels/gpu_step.h"
#include "model/wgsl_renderer.h"
#include "kernels/qmoe_problem.h"

namespace bonfire::kernels {
namespace {

using json = nlohmann::json;

struct Demo {
  std::unique_ptr<ir::LocalModel> model = ir::LocalModel::open(std::string(BONFIRE_SOURCE_DIR) + "/models/demo", {});
  Limits limits;

  Graph graph(const std::string& mode, int64_t tokens) {
    ir::LowerOptions o;
    o.mode = mode;
    o.tokens = tokens;
    o.ctx = 64;
    json call = ir::lower(model->ir(), o, &model->weights());
    call["session"] = "s";
    return Graph::parse(call, {"tokens"}, limits);
  }
  WeightLookup weights() const {
    return [this](const std::string& n) { return model->weights().find(n); };
  }
  GpuStep step(const Graph& g, std::map<std::string, Tensor>& inputs, const json& bind, Session* s) {
    const auto plan = plan_graph(g, inputs, bind, weights(), s, limits);
    return plan_gpu_step(
        g, plan,
        [&](const Ref& r) {
          if (r.kind == Ref::Input) return inputs.at(r.name).desc();
          if (r.kind == Ref::Weight) return weights()(r.name)->desc();
          return s->tensors.at(r.name).desc();
        },
        testing::test_device("swiftshader"), memoized_renderer(render_wgsl));
  }
};

Tensor ids(std::vector<float> v) {
  Tensor t = Tensor::empty({(int64_t)v.size()});
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

// A llama-style prefill and decode run whole on the GPU, the caches'
// allocation (zeros) and the last row's slice included.
TEST(GpuStep, DemoStepsRunWholeOnTheGpu) {
  Demo d;
  std::map<std::string, Tensor> in{{"tokens", ids({1, 5, 9})}};
  Session s;
  const Graph pre = d.graph("prefill", 3);
  const GpuStep p = d.step(pre, in, json{{"pos", 0}}, &s);
  ASSERT_EQ(p.items.size(), pre.nodes.size());
  for (const auto& item : p.items) EXPECT_TRUE(item.gpu) << item.id << ": " << item.why_cpu;
  // One shader per distinct text: the 4 layers share theirs.
  EXPECT_LE(p.shaders.size(), 14u);
  EXPECT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(p.retain.at("L0.kv.k"), "n:L0.kv.k");
  EXPECT_EQ(p.values.at("w:model.embed_tokens.weight").from, "weight");
  EXPECT_EQ(p.values.at("n:L0.kv.k").bytes, 64 * 128 * 4);
  // Constants are the node's own; rope tables hold the step's positions.
  const json j = p.to_json();
  bool rope_table = false;
  for (const auto& item : j["items"])
    for (const auto& b : item.value("buffers", json::array()))
      if (b["kind"] == "constant") {
        EXPECT_EQ(b["id"].get<std::string>().rfind(item["out"].get<std::string>() + "#", 0), 0u) << b["id"];
        rope_table |= b["id"] == "n:L0.rope#cos";
      }
  EXPECT_TRUE(rope_table);

  // The decode step reads the caches as session tensors; held on a device,
  // they plan by shape, and the CPU engine refuses to read them.
  for (const char* name : {"L0.kv.k", "L0.kv.v", "L1.kv.k", "L1.kv.v", "L2.kv.k", "L2.kv.v", "L3.kv.k", "L3.kv.v"}) {
    Tensor t;
    t.shape = {64, 128};
    s.tensors[name] = t;
    ASSERT_TRUE(on_device(s.tensors[name]));
  }
  std::map<std::string, Tensor> one{{"tokens", ids({7})}};
  const Graph dec = d.graph("decode", 1);
  const GpuStep q = d.step(dec, one, json{{"pos", 3}}, &s);
  EXPECT_EQ(q.gpu_nodes(), (int)dec.nodes.size());
  EXPECT_LE(q.shaders.size(), 10u);  // one per kind of node and shape class, shared by the 4 layers
  EXPECT_EQ(q.values.at("s:L0.kv.k").from, "state");
  // cache_write on a session tensor writes it in place: its new value is the session's.
  EXPECT_TRUE(dec.retain.empty());
  EXPECT_EQ(q.retain.at("L3.kv.v"), "n:L3.kv.v");
  EXPECT_EQ(q.retain.size(), 8u);
  try {
    run_graph(dec, one, json{{"pos", 3}}, d.weights(), &s, d.limits);
    FAIL() << "a device-held cache was read on the CPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::SessionNotFound);
    EXPECT_NE(std::string(e.what()).find("held by this worker's GPU"), std::string::npos) << e.what();
  }
}

// What the GPU kernels cannot do stays on the CPU, with the reason.
TEST(GpuStep, UnsupportedNodesStayOnTheCpuNamingWhy) {
  Limits limits;
  const json call = {{"nodes", json::array({
                                   {{"id", "a"}, {"op", "silu"}, {"in", {"x"}}},
                                   {{"id", "b"}, {"op", "softmax"}, {"in", {"a"}}},
                                   {{"id", "c"}, {"op", "add"}, {"in", {"b", "a"}}},
                               })},
                     {"outputs", {"c"}}};
  const Graph g = Graph::parse(call, {"x"}, limits);
  std::map<std::string, Tensor> in{{"x", ids({1, 2, 3})}};
  const auto plan = plan_graph(g, in, json::object(), nullptr, nullptr, limits);
  const GpuStep s = plan_gpu_step(
      g, plan, [&](const Ref& r) { return in.at(r.name).desc(); }, testing::test_device("swiftshader"), render_wgsl);
  ASSERT_EQ(s.items.size(), 3u);
  EXPECT_TRUE(s.items[0].gpu);
  EXPECT_FALSE(s.items[1].gpu);
  EXPECT_NE(s.items[1].why_cpu.find("softmax has no GPU kernel"), std::string::npos) << s.items[1].why_cpu;
  EXPECT_TRUE(s.items[2].gpu);
  EXPECT_EQ(s.items[2].in, (std::vector<std::string>{"n:b", "n:a"}));
  EXPECT_EQ(s.outputs.at(0).second, "n:c");
}

}  // namespace
}  // namespace bonfire::kernels
