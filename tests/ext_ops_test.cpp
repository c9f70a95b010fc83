// Protocol extension ops (docs/PROTOCOL-EXTENSIONS.md) beyond their goldens:
// feature routing (a graph lists the op's ext. feature; a worker without it
// refuses with unsupported_feature, also through `--disable-feature`), `bonfire
// ops` still printing only v3's manifest, shape and param errors that name
// the input, and state written in place.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "core/error.h"
#include "golden_util.h"
#include "graph/executor.h"
#include "graph/wire.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

using testing::Outcome;
using testing::run_command;
using testing::run_text;

constexpr const char* kExprCall = R"J({"inputs": {"a": {"shape": [2, 2], "data": [1, 2, 3, 4]}},
  "nodes": [{"id": "y", "op": "expr", "in": ["a"], "params": {"expr": "a * a + 1"}}], "outputs": ["y"]})J";

TEST(ExtFeatures, GraphListsTheFeatureOfEveryExtensionOp) {
  const Limits limits;
  Call c = Call::parse_text(R"J({"inputs": {"x": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "a", "op": "expr", "in": ["x"], "params": {"expr": "exp(a)"}},
              {"id": "b", "op": "silu", "in": ["a"]},
              {"id": "c", "op": "depth_route", "in": ["a", "b", "x"], "params": {"step": 1}}],
    "outputs": ["c"]})J",
                            limits);
  EXPECT_EQ(c.graph.features, (std::set<std::string>{"ext.depth_route", "ext.expr"}));
  const std::set<std::string> have = implemented_features();
  for (const auto& op : op_registry())
    if (op.extension) {
      for (const auto& f : op.features) EXPECT_TRUE(have.count(f.name)) << f.name;
    }
}

TEST(ExtFeatures, WorkerWithoutTheFeatureRefuses) {
  const Limits limits;
  Call c = Call::parse_text(kExprCall, limits);
  std::set<std::string> have = implemented_features();
  EXPECT_NO_THROW(require_features(c.graph, have));
  have.erase("ext.expr");
  try {
    require_features(c.graph, have);
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::UnsupportedFeature);
    EXPECT_EQ(e.feature, "ext.expr");
  }
}

TEST(ExtCli, DisableFeatureRefusesWithUnsupportedFeature) {
  const fs::path dir = fs::temp_directory_path() / ("bonfire_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "expr.json";
  std::ofstream(file) << kExprCall;
  const std::string base = std::string(BONFIRE_BINARY) + " graph run " + file.string() + " --session-dir \"\"";
  auto [out, status] = run_command(base);
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(json::parse(out)["outputs"]["y"]["data"], json::parse("[2, 5, 10, 17]"));
  std::tie(out, status) = run_command(base + " --disable-feature ext.expr");
  EXPECT_EQ(status, 1) << out;
  const json j = json::parse(out);
  EXPECT_EQ(j["code"], "unsupported_feature");
  EXPECT_EQ(j["feature"], "ext.expr");
  // another extension feature disabled does not matter
  std::tie(out, status) = run_command(base + " --disable-feature ext.recurrence");
  EXPECT_EQ(status, 0) << out;
  fs::remove_all(dir);
}

TEST(ExtCli, OpsPrintsOnlyTheV3Manifest) {
  auto [out, status] = run_command(std::string(BONFIRE_BINARY) + " ops");
  ASSERT_EQ(status, 0);
  EXPECT_EQ(out, testing::slurp(testing::source_dir() / "spec" / "ops-v3.json"));
  EXPECT_EQ(out.find("linear_attention"), std::string::npos);
  EXPECT_EQ(out.find("ext."), std::string::npos);
}

TEST(ExtOps, ShapeErrorsNameTheInput) {
  Outcome o = run_text(R"J({"inputs": {"q": {"shape": [1, 4], "data": [1, 2, 3, 4]},
      "S": {"shape": [4, 3], "data": [0,0,0,0,0,0,0,0,0,0,0,0]}, "z": {"shape": [2, 2], "data": [0,0,0,0]}},
    "nodes": [{"id": "la", "op": "linear_attention", "in": ["q", "q", "q", "S", "z"],
               "params": {"heads": 2, "headDim": 2}}], "outputs": ["la"]})J");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_EQ(o.node, "la");
  EXPECT_NE(o.message.find("S (state)"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("[4, 2]"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("[4, 3]"), std::string::npos) << o.message;

  o = run_text(R"J({"inputs": {"a": {"shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}, "b": {"shape": [3, 2], "data": [1, 2, 3, 4, 5, 6]}},
    "nodes": [{"id": "y", "op": "expr", "in": ["a", "b"], "params": {"expr": "a + b"}}], "outputs": ["y"]})J");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("input b [3, 2]"), std::string::npos) << o.message;

  o = run_text(R"J({"inputs": {"x": {"shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}, "h": {"shape": [3, 2], "data": [0,0,0,0,0,0]}},
    "nodes": [{"id": "s", "op": "selective_scan", "in": ["x", "x", "h", "x", "h", "h"]}], "outputs": ["s"]})J");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("B must be [T, d_state]"), std::string::npos) << o.message;
}

TEST(ExtOps, ExpressionErrorsAreBadGraphWithPosition) {
  Outcome o = run_text(R"J({"inputs": {"a": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "expr", "in": ["a"], "params": {"expr": "a + b"}}], "outputs": ["y"]})J");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("unknown name 'b'"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("character 5"), std::string::npos) << o.message;
  o = run_text(R"J({"inputs": {"a": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "expr", "in": ["a"], "params": {"expr": "len(a)"}}], "outputs": ["y"]})J");
  EXPECT_EQ(o.code, "bad_graph");
  // recurrence: an update must assign a state tensor; a let sees only earlier lets
  const std::string head = R"J({"session": "r", "inputs": {"x": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "recurrence", "in": ["x", "s:h"], "params": {"index": [["c", 2]],
      "inputs": ["x"], "state": ["h"], )J";
  Session s;
  s.tensors["h"] = Tensor::zeros({2});
  o = run_text(head + R"J("update": ["x = h + 1"], "readout": "h"}}], "outputs": ["y"]})J", &s);
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("not a state tensor"), std::string::npos) << o.message;
  o = run_text(head + R"J("let": ["p = q + 1", "q = 2"], "update": ["h = p"], "readout": "h"}}], "outputs": ["y"]})J", &s);
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("unknown name 'q'"), std::string::npos) << o.message;
  o = run_text(head + R"J("update": ["h == 1"], "readout": "h"}}], "outputs": ["y"]})J", &s);
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("name = expression"), std::string::npos) << o.message;
  // init mode: no data inputs visible; only state tensors or new names are assigned
  const std::string init_head = R"J({"session": "r", "weights": {"w": {"shape": [2], "data": [1, 2]}},
    "nodes": [{"id": "i", "op": "recurrence", "in": ["w:w", "s:h"], "params": {"index": [["c", 2]],
      "inputs": ["x"], "weights": ["w"], "state": ["h"], "mode": "init", )J";
  o = run_text(init_head + R"J("init": ["h = x"]}}], "outputs": ["i"]})J", &s);
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("unknown name 'x'"), std::string::npos) << o.message;
  o = run_text(init_head + R"J("init": ["w = 1"]}}], "outputs": ["i"]})J", &s);
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("assigns \"w\""), std::string::npos) << o.message;
  // a refused call left the state as it was
  EXPECT_EQ(s.tensors["h"].f32()[0], 0.0f);
  o = run_text(init_head + R"J("init": ["t = w * 3", "h = t + c"]}}], "outputs": ["i"]})J", &s);
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_EQ(o.result.outputs["i"].shape, (Shape{1}));
  EXPECT_EQ(s.tensors["h"].f32()[0], 3.0f);
  EXPECT_EQ(s.tensors["h"].f32()[1], 7.0f);
}

TEST(ExtOps, StateWrittenInPlaceAndWeightsRefusedThere) {
  Session s;
  s.tensors["h"] = Tensor::zeros({2});
  const std::string call = R"J({"session": "r", "inputs": {"x": {"shape": [2, 2], "data": [1, 2, 3, 4]}},
    "nodes": [{"id": "y", "op": "recurrence", "in": ["x", "s:h"], "params": {"index": [["c", 2]],
      "inputs": ["x"], "state": ["h"], "update": ["h = h + x"], "readout": "h * 10 + c"}}], "outputs": ["y"]})J";
  Outcome o = run_text(call, &s);
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_EQ(o.result.outputs["y"].f32()[0], 10.0f);
  EXPECT_EQ(o.result.outputs["y"].f32()[1], 21.0f);
  EXPECT_EQ(o.result.outputs["y"].f32()[2], 40.0f);
  EXPECT_EQ(o.result.outputs["y"].f32()[3], 61.0f);
  EXPECT_EQ(s.tensors["h"].f32()[0], 4.0f);
  EXPECT_EQ(s.tensors["h"].f32()[1], 6.0f);

  o = run_text(R"J({"weights": {"h": {"shape": [2], "data": [0, 0]}}, "inputs": {"x": {"shape": [1, 2], "data": [1, 2]}},
    "nodes": [{"id": "y", "op": "recurrence", "in": ["x", "w:h"], "params": {"index": [["c", 2]],
      "inputs": ["x"], "state": ["h"], "update": ["h = h + x"], "readout": "h"}}], "outputs": ["y"]})J");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("in place"), std::string::npos) << o.message;
  o = run_text(R"J({"weights": {"z": {"shape": [1, 1], "data": [0]}}, "inputs": {"q": {"shape": [1, 1], "data": [1]},
      "S": {"shape": [1, 1], "data": [0]}},
    "nodes": [{"id": "y", "op": "linear_attention", "in": ["q", "q", "q", "S", "w:z"],
      "params": {"heads": 1, "headDim": 1}}], "outputs": ["y"]})J");
  EXPECT_EQ(o.code, "bad_graph");
  EXPECT_NE(o.message.find("\"w:z\" is a weight"), std::string::npos) << o.message;

  // the op table says which inputs are written
  const OpDef* rec = find_op("recurrence");
  ASSERT_NE(rec, nullptr);
  const Params p(json{{"state", {"h", "n"}}});
  EXPECT_FALSE(rec->writes(2, p, 5));
  EXPECT_TRUE(rec->writes(3, p, 5));
  EXPECT_TRUE(rec->writes(4, p, 5));
  const OpDef* sel = find_op("selective_scan");
  EXPECT_TRUE(sel->writes(5, Params(), 6));
  EXPECT_FALSE(sel->writes(5, Params(), 7));
  EXPECT_TRUE(sel->writes(6, Params(), 7));
  EXPECT_TRUE(find_op("short_conv")->writes(4, Params(), 5));
}

TEST(ExtOps, ExprBroadcastsAndNamesInputsBothWays) {
  Outcome o = run_text(R"J({"inputs": {"a": {"shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]},
      "col": {"shape": [2, 1], "data": [10, 20]}, "row": {"shape": [3], "data": [100, 200, 300]},
      "one": {"shape": [1], "data": [1000]}},
    "nodes": [{"id": "y", "op": "expr", "in": ["a", "col", "row", "one"], "params": {"expr": "x0 + b + c + d - a"}}],
    "outputs": ["y"]})J");
  ASSERT_TRUE(o.ok) << o.message;
  const float want[] = {1110, 1210, 1310, 1120, 1220, 1320};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o.result.outputs["y"].f32()[i], want[i]) << i;
  // NaN and Inf flow through; division by zero is IEEE
  o = run_text(R"J({"inputs": {"a": {"shape": [3], "data": [1, 0, -1]}},
    "nodes": [{"id": "y", "op": "expr", "in": ["a"], "params": {"expr": "a / 0"}}], "outputs": ["y"]})J");
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_TRUE(std::isinf(o.result.outputs["y"].f32()[0]) && o.result.outputs["y"].f32()[0] > 0);
  EXPECT_TRUE(std::isnan(o.result.outputs["y"].f32()[1]));
  EXPECT_TRUE(std::isinf(o.result.outputs["y"].f32()[2]) && o.result.outputs["y"].f32()[2] < 0);
}

TEST(ExtOps, SelectiveScanLongPrefillEqualsTokenByToken) {
  // A larger shape than the goldens: parallel over channels, one call of 16
  // tokens against 16 calls of one token.
  const int64_t T = 16, Ch = 67, N = 5;
  auto fill = [](Tensor& t, double scale, int seed) {
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = (float)(scale * std::sin(0.37 * (double)i + seed));
  };
  Tensor x = Tensor::empty({T, Ch}), dt = Tensor::empty({T, Ch}), B = Tensor::empty({T, N}), C = Tensor::empty({T, N});
  Tensor A_log = Tensor::empty({Ch, N}), D = Tensor::empty({Ch});
  fill(x, 1, 1), fill(dt, 2, 2), fill(B, 1, 3), fill(C, 1, 4), fill(A_log, 1, 5), fill(D, 1, 6);
  const OpDef* op = find_op("selective_scan");
  Tensor h1 = Tensor::zeros({Ch, N}), y1 = Tensor::empty({T, Ch});
  op->run({&x, &dt, &B, &C, &A_log, &D, &h1}, Params(), y1);
  Tensor h2 = Tensor::zeros({Ch, N});
  for (int64_t t = 0; t < T; ++t) {
    auto row = [&](Tensor& src) {
      return Tensor::view(DType::F32, {1, src.shape[1]}, src.f32() + t * src.shape[1], src.owner);
    };
    Tensor xt = row(x), dtt = row(dt), Bt = row(B), Ct = row(C), yt = Tensor::empty({1, Ch});
    op->run({&xt, &dtt, &Bt, &Ct, &A_log, &D, &h2}, Params(), yt);
    for (int64_t c = 0; c < Ch; ++c) EXPECT_NEAR(yt.f32()[c], y1.f32()[t * Ch + c], 1e-5) << t << "," << c;
  }
  for (int64_t i = 0; i < Ch * N; ++i) EXPECT_NEAR(h1.f32()[i], h2.f32()[i], 1e-5);
}

}  // namespace
}  // namespace bonfire
