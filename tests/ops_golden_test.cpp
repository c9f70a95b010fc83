// Every case of goldens/ops/*.json (PyTorch references written by
// scripts/gen_goldens.py) runs as a graph call through the engine: outputs,
// features used, and session tensors after the call must match. A case may
// chain later calls on the same session ("then": [{graph, features,
// expected}], a prefill followed by decode steps); "expectedSession" is
// checked after the last one.
#include <gtest/gtest.h>

#include "core/error.h"
#include "golden_util.h"
#include "graph/executor.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct GoldenCase {
  std::string op;
  json body;
};

std::vector<GoldenCase> load_cases() {
  std::vector<GoldenCase> out;
  const fs::path dir = testing::source_dir() / "goldens" / "ops";
  if (!fs::exists(dir)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const json j = testing::read_json(f);
    for (const auto& c : j["cases"]) out.push_back({j["op"].get<std::string>(), c});
  }
  return out;
}

// Packed weights of a case: raw stored bytes, held like a model's weights.
std::map<std::string, Tensor> load_packed(const json& packed) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, p] : packed.items()) {
    DType t;
    if (!dtype_from_name(p["dtype"].get<std::string>(), &t)) throw std::runtime_error("bad dtype in golden");
    auto bytes = std::make_shared<std::string>();
    if (!base64_decode(p["b64"].get<std::string>(), bytes.get())) throw std::runtime_error("bad b64 in golden");
    const Shape shape = p["shape"].get<Shape>();
    Tensor w = Tensor::view(t, shape, bytes->data(), bytes);
    if (w.nbytes() != (int64_t)bytes->size()) throw std::runtime_error("packed size mismatch for " + name);
    out[name] = w;
  }
  return out;
}

class OpGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(OpGolden, MatchesReference) {
  const json& c = GetParam().body;
  const Limits limits;
  const double atol = c["tol"].value("atol", 1e-5), rtol = c["tol"].value("rtol", 1e-5);
  Call call = Call::parse(c["graph"], limits);

  std::set<std::string> want_features;
  for (const auto& f : c.value("features", json::array())) want_features.insert(f.get<std::string>());
  EXPECT_EQ(call.graph.features, want_features);

  const auto packed = load_packed(c.value("packed", json::object()));
  Session session;
  const json session_in = c.value("session", json::object());
  for (const auto& [k, v] : session_in.items())
    session.tensors[k] = tensor_from_json(v, "session " + k, limits);

  auto run_and_check = [&](const Call& cl, const json& expected, const std::string& which) {
    RunResult r;
    try {
      r = run_call(cl, &session, limits, [&](const std::string& n) -> const Tensor* {
        auto it = packed.find(n);
        return it == packed.end() ? nullptr : &it->second;
      });
    } catch (const Error& e) {
      ADD_FAILURE() << which << ": engine refused the golden: " << error_to_json(e).dump();
      return false;
    }
    for (const auto& [name, want] : expected.items()) {
      if (!r.outputs.count(name)) {
        ADD_FAILURE() << which << ": no output " << name;
        return false;
      }
      EXPECT_TRUE(testing::near(r.outputs[name], want, atol, rtol)) << which << ": output " << name;
    }
    return true;
  };
  if (!run_and_check(call, c["expected"], "call 1")) return;
  const json then = c.value("then", json::array());
  for (size_t i = 0; i < then.size(); ++i) {
    Call next = Call::parse(then[i]["graph"], limits);
    std::set<std::string> next_features;
    for (const auto& f : then[i].value("features", json::array())) next_features.insert(f.get<std::string>());
    EXPECT_EQ(next.graph.features, next_features) << "call " << i + 2;
    if (!run_and_check(next, then[i]["expected"], "call " + std::to_string(i + 2))) return;
  }
  const json session_want = c.value("expectedSession", json::object());
  for (const auto& [name, want] : session_want.items()) {
    ASSERT_TRUE(session.tensors.count(name)) << "no session tensor " << name;
    EXPECT_TRUE(testing::near(session.tensors[name], want, atol, rtol)) << "session tensor " << name;
  }
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string n = info.param.op + "_" + info.param.body.value("name", std::to_string(info.index));
  for (auto& ch : n)
    if (!std::isalnum((unsigned char)ch)) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGolden, ::testing::ValuesIn(load_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OpGolden);

// Every op of the manifest, and every protocol extension op, has golden cases.
TEST(OpGoldenCoverage, EveryOpHasCases) {
  std::set<std::string> covered;
  for (const auto& c : load_cases()) covered.insert(c.op);
  for (const auto& op : op_registry()) EXPECT_TRUE(covered.count(op.name)) << "no golden cases for " << op.name;
}

}  // namespace
}  // namespace bonfire

namespace bonfire {
namespace {

// Every param and every feature of the manifest is exercised by some case.
TEST(OpGoldenCoverage, EveryParamAndFeatureIsExercised) {
  std::set<std::string> params, features;
  for (const auto& c : load_cases()) {
    std::vector<nlohmann::json> graphs = {c.body["graph"]};
    for (const auto& t : c.body.value("then", nlohmann::json::array())) graphs.push_back(t["graph"]);
    for (const auto& g : graphs)
      for (const auto& n : g["nodes"]) {
        const nlohmann::json node_params = n.value("params", nlohmann::json::object());
        for (const auto& [k, v] : node_params.items()) params.insert(n["op"].get<std::string>() + "." + k);
      }
    for (const auto& f : c.body.value("features", nlohmann::json::array())) features.insert(f.get<std::string>());
  }
  for (const auto& op : op_registry()) {
    for (const auto& p : op.params) EXPECT_TRUE(params.count(op.name + "." + p.name)) << op.name << "." << p.name;
    for (const auto& f : op.features) EXPECT_TRUE(features.count(f.name)) << f.name;
  }
}

}  // namespace
}  // namespace bonfire
