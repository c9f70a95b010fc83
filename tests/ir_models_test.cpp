// The IR op kinds and cases llama.cpp cannot check, against PyTorch: three
// tiny models (goldens/ir_models/<name>/: a hand-written bonfire.ir.json,
// random weights, and the logits a float64 PyTorch interpreter of docs/IR.md
// computed, from scripts/gen_ir_model_goldens.py). Each is validated,
// lowered (a prefill of the 7-token prompt and a decode step) and run through
// one Session: the prefill, then 5 decode steps fed the reference's greedy
// tokens. Together the documents use every op kind of the schema.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "golden_util.h"
#include "graph/executor.h"
#include "ir/lower.h"
#include "ir/validate.h"
#include "model/safetensors.h"
#include "spec/manifest.h"

namespace bonfire {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const char* const kModels[] = {"dense", "mla_moe", "scans"};

// Max |bonfire − PyTorch| over max |PyTorch| allowed per step.
constexpr double kTolerance = 1e-4;

fs::path model_dir(const std::string& name) { return testing::source_dir() / "goldens" / "ir_models" / name; }

// A lowered step as LocalModel::step parses it.
Call lowered(const json& doc, const std::string& mode, int64_t tokens, const WeightStore& weights,
             const Limits& limits) {
  ir::LowerOptions o;
  o.mode = mode;
  o.tokens = tokens;
  json call = ir::lower(doc, o, &weights);
  call["inputs"] = {{"tokens", {{"shape", {tokens}}, {"data", std::vector<float>(tokens, 0.f)}}}};
  call["session"] = "ir_models";
  return Call::parse(call, limits);
}

std::vector<float> run(const Call& call, const std::vector<int32_t>& tokens, int64_t pos, int64_t step,
                       Session& session, const WeightStore& weights, const Limits& limits) {
  Tensor ids = Tensor::empty({static_cast<int64_t>(tokens.size())});
  for (size_t i = 0; i < tokens.size(); ++i) ids.f32()[i] = static_cast<float>(tokens[i]);
  const WeightLookup lookup = [&](const std::string& name) -> const Tensor* {
    auto it = call.weights.find(name);
    return it != call.weights.end() ? &it->second : weights.find(name);
  };
  const auto out = run_graph(call.graph, {{"tokens", ids}}, json{{"pos", pos}, {"step", step}}, lookup, &session,
                             limits).outputs;
  const Tensor& l = out.at("logits");
  return std::vector<float>(l.f32(), l.f32() + l.numel());
}

::testing::AssertionResult logits_close(const std::vector<float>& got, const json& want_json, const std::string& what) {
  const auto want = want_json.get<std::vector<double>>();
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " logits, want " << want.size();
  double max_ref = 0, max_diff = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(want[i]));
    const double d = std::fabs(double(got[i]) - want[i]);
    if (!(d <= max_diff)) worst = i;
    max_diff = std::max(max_diff, std::isnan(d) ? INFINITY : d);
  }
  const double rel = max_diff / max_ref;
  std::printf("  %-24s max |diff| %.3g, relative %.3g\n", what.c_str(), max_diff, rel);
  if (rel <= kTolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max |diff| " << max_diff << " over max |logit| " << max_ref
                                       << " = " << rel << " (bound " << kTolerance << "); worst logit " << worst
                                       << " got " << got[worst] << " want " << want[worst];
}

class IrModelGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(IrModelGolden, MatchesPyTorch) {
  const std::string name = GetParam();
  const fs::path dir = model_dir(name);
  const json doc = testing::read_json(dir / "bonfire.ir.json");
  const json want = testing::read_json(dir / "expected.json");
  WeightStore weights;
  load_safetensors_file((dir / "model.safetensors").string(), weights);

  const auto problems = ir::validate_ir(doc, &weights);
  std::string listed;
  for (const auto& p : problems) listed += "  " + ir::format_problem(p) + "\n";
  ASSERT_TRUE(problems.empty()) << name << ": bonfire ir validate refuses the document:\n" << listed;

  const Limits limits;
  const auto prompt = want["prompt"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(prompt.size());
  const Call prefill = lowered(doc, "prefill", n, weights, limits);
  const Call decode = lowered(doc, "decode", 1, weights, limits);

  Session session;
  EXPECT_TRUE(logits_close(run(prefill, prompt, 0, 0, session, weights, limits), want["prefill_logits"], name + " prefill"));
  const json& steps = want["steps"];
  ASSERT_EQ(steps.size(), 5u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const int32_t token = steps[i]["token"].get<int32_t>();
    const std::vector<float> logits = run(decode, {token}, n + int64_t(i), int64_t(i) + 1, session, weights, limits);
    EXPECT_TRUE(logits_close(logits, steps[i]["logits"], name + " decode " + std::to_string(i + 1)));
  }
}

INSTANTIATE_TEST_SUITE_P(IrModels, IrModelGolden, ::testing::Values("dense", "mla_moe", "scans"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The three documents use every op kind the schema knows.
TEST(IrModelsCoverage, EveryOpKind) {
  std::set<std::string> kinds;
  for (const auto& op : spec::ir_schema()["$defs"]["node"]["properties"]["op"]["enum"]) kinds.insert(op.get<std::string>());
  ASSERT_EQ(kinds.size(), 31u);
  std::set<std::string> used;
  for (const char* name : kModels) {
    const json doc = testing::read_json(model_dir(name) / "bonfire.ir.json");
    for (const char* section : {"embed", "block", "head"})
      for (const auto& node : doc[section]["nodes"]) used.insert(node["op"].get<std::string>());
  }
  std::string missing;
  for (const auto& k : kinds)
    if (!used.count(k)) missing += " " + k;
  EXPECT_TRUE(missing.empty()) << "op kinds no IR test model uses:" << missing;
  for (const auto& u : used) EXPECT_TRUE(kinds.count(u)) << u << " is not an op kind of the schema";
}

}  // namespace
}  // namespace bonfire
