// The graph layer's contract: every refusal has PROTOCOL.md's code and names
// what was wrong; refused calls leave sessions untouched; parsed graphs re-run
// with new binds.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "golden_util.h"
#include "graph/executor.h"
#include "graph/wire.h"

namespace bonfire {
namespace {

using json = nlohmann::json;

using testing::Outcome;
using testing::run_text;

TEST(GraphErrors, MalformedJson) {
  Outcome o = run_text(R"({"inputs": {)");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("malformed JSON"), std::string::npos) << o.message;
}

TEST(GraphErrors, UnknownOp) {
  Outcome o = run_text(R"({"nodes": [{"id": "y", "op": "frobnicate", "in": []}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_EQ(o.node, "y");
  EXPECT_NE(o.message.find("frobnicate"), std::string::npos);
}

TEST(GraphErrors, UnknownAndMistypedParams) {
  Outcome o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "scale", "in": ["a"], "params": {"factor": 2, "bogus": 1}}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("bogus"), std::string::npos);
  o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "scale", "in": ["a"], "params": {"factor": true}}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("factor"), std::string::npos);
  o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "scale", "in": ["a"]}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("needs param \"factor\""), std::string::npos) << o.message;
  o = run_text(R"({"inputs": {"a": {"shape": [2, 2], "data": [1, 2, 3, 4]}},
    "nodes": [{"id": "y", "op": "matmul", "in": ["a", "a"], "params": {"transB": 1}}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
}

TEST(GraphErrors, WrongInputCount) {
  Outcome o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "add", "in": ["a"]}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("takes 2 inputs, got 1"), std::string::npos) << o.message;
}

TEST(GraphErrors, ShapeMismatch) {
  Outcome o = run_text(R"({"inputs": {"a": {"shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]},
                                      "b": {"shape": [2, 2], "data": [1, 2, 3, 4]}},
    "nodes": [{"id": "m", "op": "matmul", "in": ["a", "b"]}], "outputs": ["m"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_EQ(o.node, "m");
  EXPECT_NE(o.message.find("inner sizes differ"), std::string::npos) << o.message;
}

TEST(GraphErrors, UseBeforeDefinitionAndUnknownNames) {
  Outcome o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "add", "in": ["a", "z"]}, {"id": "z", "op": "relu", "in": ["a"]}],
    "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("before the node that defines it"), std::string::npos) << o.message;
  o = run_text(R"({"nodes": [{"id": "y", "op": "relu", "in": ["nothing"]}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("nothing"), std::string::npos);
  o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "a", "op": "relu", "in": ["a"]}], "outputs": ["a"]})");
  EXPECT_EQ(o.code, "bad_graph");  // defined twice
}

TEST(GraphErrors, BadExpressions) {
  Outcome o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}}, "bind": {"pos": 1},
    "nodes": [{"id": "y", "op": "scale", "in": ["a"], "params": {"factor": "pos +"}}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("pos +"), std::string::npos) << o.message;
  o = run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "scale", "in": ["a"], "params": {"factor": "pos + 1"}}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_EQ(o.node, "y");
  EXPECT_NE(o.message.find("unknown name 'pos'"), std::string::npos) << o.message;
}

TEST(GraphErrors, MissingWeightAndSessionTensor) {
  Outcome o = run_text(R"({"inputs": {"a": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "matmul", "in": ["a", "w:W"], "params": {"transB": true}}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("\"W\""), std::string::npos) << o.message;
  Session s;
  o = run_text(R"({"session": "t", "inputs": {"a": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "add", "in": ["a", "s:cache"]}], "outputs": ["y"]})", &s);
  EXPECT_EQ(o.code, "session_not_found");
  EXPECT_NE(o.message.find("cache"), std::string::npos);
  o = run_text(R"({"inputs": {"a": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "add", "in": ["a", "s:cache"]}], "outputs": ["y"]})");
  EXPECT_EQ(o.code, "bad_graph");  // s: without a session
}

TEST(GraphErrors, BadTensors) {
  EXPECT_EQ(run_text(R"({"inputs": {"a": {"shape": [3], "data": [1, 2]}}, "nodes": [], "outputs": ["a"]})").code,
            "bad_graph");
  EXPECT_EQ(run_text(R"({"inputs": {"a": {"shape": [2], "data": [1, "x"]}}, "nodes": [], "outputs": ["a"]})").code,
            "bad_graph");
  EXPECT_EQ(run_text(R"({"inputs": {"a": {"shape": [-1], "data": []}}, "nodes": [], "outputs": ["a"]})").code,
            "bad_graph");
  EXPECT_EQ(run_text(R"({"inputs": {"a": {"shape": [2], "b64": "!!"}}, "nodes": [], "outputs": ["a"]})").code,
            "bad_graph");
}

// Offsets and lengths near 2^63 once wrapped slice's and cache_write's
// bounds checks around (a read of the server's memory, a write before the
// cache); integer params are bounded, whatever op reads them.
TEST(GraphErrors, IntegerParamsThatWouldWrapABoundsCheck) {
  Outcome o = run_text(R"({"inputs": {"x": {"shape": [1, 4], "data": [1, 2, 3, 4]}},
    "nodes": [{"id": "a", "op": "slice", "in": ["x"], "params": {"start": 9223372036854774784, "length": 2048,
    "axis": -1}}], "outputs": ["a"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_EQ(o.node, "a");
  EXPECT_NE(o.message.find("param start must be an integer of magnitude at most 2147483647"), std::string::npos)
      << o.message;
  Session s;
  ASSERT_TRUE(run_text(R"({"session": "t", "nodes": [{"id": "z", "op": "zeros", "params": {"shape": [4, 1]}}],
    "retain": {"cache": "z"}, "outputs": []})", &s).ok);
  for (const char* offset : {"9223372036854774784", "1e300", "-4", "4", "3", "\"pos\""}) {
    o = run_text(std::string(R"({"session": "t", "bind": {"pos": 1e19},
      "inputs": {"v": {"shape": [2, 1], "data": [7, 7]}},
      "nodes": [{"id": "c", "op": "cache_write", "in": ["s:cache", "v"], "params": {"offset": )") + offset +
                 R"(}}], "outputs": ["c"]})", &s);
    EXPECT_EQ(o.code, "bad_graph") << offset;
    EXPECT_EQ(o.node, "c") << offset;
  }
  ASSERT_EQ(s.tensors.size(), 1u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.tensors["cache"].f32()[i], 0.0f) << i;
  // A shape whose entries multiply to 2^64 + 4, which wraps to the input's 4
  // (2^62 + 1 = 5 * 5581 * 8681 * 49477 * 384773).
  o = run_text(R"({"inputs": {"x": {"shape": [4], "data": [1, 2, 3, 4]}},
    "nodes": [{"id": "r", "op": "reshape", "in": ["x"], "params": {"shape": [5, 5581, 8681, 49477, 384773, 4]}}],
    "outputs": ["r"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("changes the element count"), std::string::npos) << o.message;
  o = run_text(R"({"inputs": {"x": {"shape": [4], "data": [1, 2, 3, 4]}},
    "nodes": [{"id": "r", "op": "reshape", "in": ["x"], "params": {"shape": [65536, 65536, 65536, -1]}}],
    "outputs": ["r"]})");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("cannot infer -1"), std::string::npos) << o.message;
}

TEST(GraphLimits, RefusedBeforeAllocating) {
  // 1e6 x 1e6 zeros would be 4 TB: refused by shape inference.
  Outcome o = run_text(R"({"nodes": [{"id": "z", "op": "zeros", "params": {"shape": [1000000, 1000000]}}],
    "outputs": ["z"]})");
  EXPECT_EQ(o.code, "too_large");
  EXPECT_EQ(o.node, "z");
  // Overflowing int64 is refused too, not wrapped.
  o = run_text(R"({"nodes": [{"id": "z", "op": "zeros", "params": {"shape": [4294967296, 4294967296, 4294967296]}}],
    "outputs": ["z"]})");
  EXPECT_EQ(o.code, "too_large");
  o = run_text(R"({"inputs": {"a": {"shape": [100000000000], "data": []}}, "nodes": [], "outputs": ["a"]})");
  EXPECT_EQ(o.code, "too_large");
  Limits small;
  small.max_nodes = 2;
  EXPECT_EQ(run_text(R"({"nodes": [{"id": "a", "op": "zeros", "params": {"shape": [1]}},
    {"id": "b", "op": "zeros", "params": {"shape": [1]}}, {"id": "c", "op": "zeros", "params": {"shape": [1]}}],
    "outputs": ["c"]})", nullptr, small).code, "too_large");
  small = Limits();
  small.max_total_bytes = 1000;
  EXPECT_EQ(run_text(R"({"nodes": [{"id": "a", "op": "zeros", "params": {"shape": [200]}},
    {"id": "b", "op": "zeros", "params": {"shape": [200]}}], "outputs": ["b"]})", nullptr, small).code, "too_large");
}

TEST(GraphRun, NanAndInfFlowThrough) {
  Outcome o = run_text(R"({"inputs": {"a": {"shape": [4], "data": ["NaN", "Infinity", "-Infinity", 1]}},
    "nodes": [{"id": "y", "op": "add", "in": ["a", "a"]}, {"id": "s", "op": "softmax", "in": ["a"]},
              {"id": "r", "op": "rmsnorm", "in": ["a", "a"]}], "outputs": ["y", "s", "r"]})");
  ASSERT_TRUE(o.ok) << o.message;
  const Tensor& y = o.result.outputs["y"];
  EXPECT_TRUE(std::isnan(y.f32()[0]));
  EXPECT_EQ(y.f32()[1], INFINITY);
  EXPECT_EQ(y.f32()[2], -INFINITY);
  EXPECT_EQ(y.f32()[3], 2.0f);
  const json j = tensor_to_json(y);
  EXPECT_EQ(j["data"][0], "NaN");
  EXPECT_EQ(j["data"][1], "Infinity");
  EXPECT_EQ(j["data"][2], "-Infinity");
}

const char* kCacheCall = R"({"session": "t", "inputs": {"v": {"shape": [1, 2], "data": [7, 8]}},
  "nodes": [{"id": "c", "op": "cache_write", "in": ["s:cache", "v"], "params": {"offset": "pos"}}],
  "outputs": ["c"]})";

TEST(GraphSessions, RefusedCallLeavesSessionUntouched) {
  Session s;
  ASSERT_TRUE(run_text(R"({"session": "t", "nodes": [{"id": "z", "op": "zeros", "params": {"shape": [3, 2]}}],
    "retain": {"cache": "z"}, "outputs": []})", &s).ok);
  const Limits limits;
  Call c = Call::parse_text(kCacheCall, limits);
  c.bind["pos"] = 1;
  run_call(c, &s, limits);
  // pos 3 overflows the cache: refused, and the earlier write is intact.
  c.bind["pos"] = 3;
  EXPECT_THROW(run_call(c, &s, limits), Error);
  // A later node failing also refuses before the cache_write runs.
  Outcome o = run_text(R"({"session": "t", "bind": {"pos": 0}, "inputs": {"v": {"shape": [1, 2], "data": [9, 9]}},
    "nodes": [{"id": "c", "op": "cache_write", "in": ["s:cache", "v"], "params": {"offset": "pos"}},
              {"id": "bad", "op": "matmul", "in": ["c", "c"]}], "outputs": ["bad"], "retain": {"other": "v"}})", &s);
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_EQ(o.node, "bad");
  const float want[] = {0, 0, 7, 8, 0, 0};
  ASSERT_EQ(s.tensors.size(), 1u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s.tensors["cache"].f32()[i], want[i]) << i;
}

TEST(GraphSessions, ParsedOnceRerunWithNewBinds) {
  Session s;
  ASSERT_TRUE(run_text(R"({"session": "t", "nodes": [{"id": "z", "op": "zeros", "params": {"shape": [3, 2]}}],
    "retain": {"cache": "z"}, "outputs": []})", &s).ok);
  const Limits limits;
  const Call c = Call::parse_text(kCacheCall, limits);
  for (int pos = 0; pos < 3; ++pos) {
    std::map<std::string, Tensor> inputs = c.inputs;
    inputs["v"] = Tensor::zeros({1, 2});
    inputs["v"].f32()[0] = (float)pos + 1;
    RunResult r = run_graph(c.graph, inputs, json{{"pos", pos}}, nullptr, &s, limits);
    EXPECT_EQ(r.outputs["c"].data, s.tensors["cache"].data);  // in place, same buffer
  }
  EXPECT_EQ(s.tensors["cache"].f32()[0], 1.0f);
  EXPECT_EQ(s.tensors["cache"].f32()[2], 2.0f);
  EXPECT_EQ(s.tensors["cache"].f32()[4], 3.0f);
}

TEST(GraphRun, WritingAWeightInPlaceIsRefused) {
  Outcome o = run_text(R"({"weights": {"W": {"shape": [2, 2], "data": [1, 2, 3, 4]}},
    "inputs": {"v": {"shape": [1, 2], "data": [7, 8]}},
    "nodes": [{"id": "c", "op": "cache_write", "in": ["w:W", "v"], "params": {"offset": 0}}], "outputs": ["c"]})");
  EXPECT_EQ(o.code, "bad_graph");
}

TEST(GraphRun, FeaturesUsedAreReported) {
  const Limits limits;
  Call c = Call::parse_text(R"({"inputs": {"x": {"shape": [1, 4], "data": [1, 2, 3, 4]},
                                           "g": {"shape": [2], "data": [1, 1]}},
    "nodes": [{"id": "a", "op": "rmsnorm", "in": ["x", "g"], "params": {"groupSize": 2}},
              {"id": "b", "op": "rope", "in": ["a"], "params": {"headDim": 4, "interleaved": true}},
              {"id": "c", "op": "layernorm", "in": ["x", "x", "x"]}], "outputs": ["b"]})", limits);
  EXPECT_EQ(c.graph.features, (std::set<std::string>{"rmsnorm.groupSize", "rope.interleaved"}));
}

// A feature param written at its neutral value asks nothing of the feature
// (the manifest: "a LayerNorm epsilon other than the 1e-5 default", "a score
// scale other than 1/sqrt(headDim)"), so a worker without it runs the node;
// any other value, or an expression, still needs it.
TEST(GraphRun, FeatureParamsAtTheirNeutralValuesNeedNoFeature) {
  const Limits limits;
  auto features = [&](const std::string& op, const std::string& in, const std::string& params) {
    return Call::parse_text(R"({"inputs": {"x": {"shape": [1, 8], "data": [1, 2, 3, 4, 5, 6, 7, 8]}},
      "nodes": [{"id": "n", "op": ")" + op + R"(", "in": )" + in + R"(, "params": )" + params + R"(}],
      "outputs": ["n"], "bind": {"e": 1e-5}})", limits).graph.features;
  };
  using Set = std::set<std::string>;
  const std::string ln = R"(["x", "x", "x"])", rms = R"(["x", "x"])", qkv = R"(["x", "x", "x"])";
  EXPECT_EQ(features("layernorm", ln, R"({"eps": 1e-5})"), Set{});
  EXPECT_EQ(features("layernorm", ln, R"({"eps": 1e-6})"), Set{"layernorm.eps"});
  EXPECT_EQ(features("layernorm", ln, R"({"eps": "e"})"), Set{"layernorm.eps"});  // known only when bound
  EXPECT_EQ(features("rmsnorm", rms, R"({"weightOffset": 0})"), Set{});
  EXPECT_EQ(features("rmsnorm", rms, R"({"weightOffset": 1})"), Set{"rmsnorm.weightOffset"});
  EXPECT_EQ(features("rope", R"(["x"])", R"({"headDim": 8, "interleaved": false, "rotaryDim": 8})"), Set{});
  EXPECT_EQ(features("rope", R"(["x"])", R"({"headDim": 8, "rotaryDim": 4})"), Set{"rope.rotaryDim"});
  const std::string heads = R"("heads": 2, "headDim": 4)";
  EXPECT_EQ(features("attention", qkv, "{" + heads + R"(, "scale": 0.5, "alibi": false})"), Set{});
  EXPECT_EQ(features("attention", qkv, "{" + heads + R"(, "scale": 0.25})"), Set{"attention.scale"});
  EXPECT_EQ(features("attention", qkv, "{" + heads + R"(, "alibi": true})"), Set{"attention.alibi"});
  EXPECT_EQ(features("attention", qkv, "{" + heads + R"(, "alibi": false, "alibiMax": 8})"), Set{"attention.alibi"});
}

TEST(GraphRun, LongChainReusesBuffers) {
  // 200 nodes of 1M floats each would be 800 MB without reuse; the limit of
  // total bytes counts allocations, so run with a pool and check the result.
  json call = {{"inputs", {{"a", {{"shape", {4}}, {"data", {1, 2, 3, 4}}}}}}, {"nodes", json::array()}};
  std::string prev = "a";
  for (int i = 0; i < 200; ++i) {
    const std::string id = "n" + std::to_string(i);
    call["nodes"].push_back({{"id", id}, {"op", "scale"}, {"in", {prev}}, {"params", {{"factor", 1.01}}}});
    prev = id;
  }
  call["outputs"] = {prev};
  Outcome o = run_text(call.dump());
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_NEAR(o.result.outputs[prev].f32()[3], 4 * std::pow(1.01, 200), 1e-3);
}

}  // namespace
}  // namespace bonfire

namespace bonfire {
namespace {

TEST(GraphFeatures, MissingFeatureIsRefusedWithItsName) {
  const Limits limits;
  Call c = Call::parse_text(R"({"inputs": {"x": {"shape": [1, 4], "data": [1, 2, 3, 4]},
    "g": {"shape": [4], "data": [1, 1, 1, 1]}},
    "nodes": [{"id": "a", "op": "rmsnorm", "in": ["x", "g"], "params": {"weightOffset": 1}}], "outputs": ["a"]})",
                            limits);
  std::set<std::string> have = implemented_features();
  EXPECT_NO_THROW(require_features(c.graph, have));
  have.erase("rmsnorm.weightOffset");
  try {
    require_features(c.graph, have);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::UnsupportedFeature);
    EXPECT_EQ(e.feature, "rmsnorm.weightOffset");
    EXPECT_EQ(error_to_json(e)["feature"], "rmsnorm.weightOffset");
    EXPECT_EQ(error_to_json(e)["node"], "a");  // the node that uses it
  }
}

}  // namespace
}  // namespace bonfire
