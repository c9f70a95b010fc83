// Pipeline stages (docs/IR.md §13): a model lowered as stages by layer
// range, each stage with its own session and the carry outputs of one fed
// as the inputs of the next, computes what the unsplit model computes. The
// stages run the very kernels of the unsplit graph on the same values, so
// logits must be bit-identical, not merely close.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "golden_util.h"
#include "graph/executor.h"
#include "ir/generation.h"
#include "ir/lower.h"
#include "model/safetensors.h"
#include "test_models.h"

namespace bonfire {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Ranges = std::vector<std::pair<int64_t, int64_t>>;
using Outputs = std::map<std::string, Tensor>;

const json kGreedy = {{"temperature", 0}, {"seed", 0}};

Tensor ids_tensor(const std::vector<int32_t>& tokens) {
  Tensor t = Tensor::empty({static_cast<int64_t>(tokens.size())});
  for (size_t i = 0; i < tokens.size(); ++i) t.f32()[i] = static_cast<float>(tokens[i]);
  return t;
}

// The calls of every stage for one step shape (a prefill of T tokens, or a
// decode step), parsed as a coordinator would send them.
struct Stage {
  int64_t first = 0, end = 0;
  json prefill_json, decode_json;
  Call prefill, decode;
  std::vector<ir::CarryValue> in, out;  // what crosses its first and end boundaries
  Session session;
};

class Pipeline {
 public:
  Pipeline(const json& doc, const WeightStore& weights, const Ranges& ranges, int64_t prompt, const json& sample)
      : weights_(weights), stages_(ranges.size()) {
    const int64_t n_layers = doc["model"]["n_layers"].get<int64_t>();
    for (size_t k = 0; k < ranges.size(); ++k) {
      Stage& s = stages_[k];
      s.first = ranges[k].first;
      s.end = ranges[k].second;
      if (s.first > 0) s.in = ir::stage_carry(doc, s.first, &weights);
      if (s.end < n_layers) s.out = ir::stage_carry(doc, s.end, &weights);
      s.prefill_json = lower(doc, s, "prefill", prompt, sample);
      s.decode_json = lower(doc, s, "decode", 1, sample);
      s.prefill = Call::parse(s.prefill_json, limits_);
      s.decode = Call::parse(s.decode_json, limits_);
    }
  }

  Outputs prefill(const std::vector<int32_t>& tokens) { return run(true, tokens, 0, 0); }
  Outputs decode(int32_t token, int64_t pos, int64_t step) { return run(false, {token}, pos, step); }
  std::vector<Stage>& stages() { return stages_; }

 private:
  json lower(const json& doc, const Stage& s, const std::string& mode, int64_t tokens, const json& sample) {
    ir::LowerOptions o;
    o.mode = mode;
    o.tokens = tokens;
    o.ctx = 64;
    o.sample = sample;
    o.first_layer = s.first;
    o.end_layer = s.end;
    json call = ir::lower(doc, o, &weights_);
    call["inputs"] = {{"tokens", {{"shape", {tokens}}, {"data", std::vector<float>(tokens, 0.f)}}}};
    for (const auto& c : s.in) {
      EXPECT_GT(c.width, 0) << c.name << ": the width is not known";
      call["inputs"][c.name] = {{"shape", {tokens, c.width}}, {"data", std::vector<float>(tokens * c.width, 0.f)}};
    }
    call["session"] = "stage";
    return call;
  }

  Outputs run(bool prefill, const std::vector<int32_t>& tokens, int64_t pos, int64_t step) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    Outputs carry;
    for (size_t k = 0; k < stages_.size(); ++k) {
      Stage& s = stages_[k];
      const Call& call = prefill ? s.prefill : s.decode;
      Outputs inputs = carry;
      inputs["tokens"] = ids_tensor(tokens);
      const WeightLookup lookup = [&](const std::string& name) -> const Tensor* {
        auto it = call.weights.find(name);
        return it != call.weights.end() ? &it->second : weights_.find(name);
      };
      Outputs out = run_graph(call.graph, inputs, json{{"pos", pos}, {"step", step}}, lookup, &s.session, limits_)
                        .outputs;
      if (k + 1 == stages_.size()) return out;
      // The outputs are exactly what stage_carry announces, in its order and widths.
      EXPECT_EQ(out.size(), s.out.size()) << "stage " << k;
      for (const auto& c : s.out) {
        auto it = out.find(c.name);
        if (it == out.end()) {
          ADD_FAILURE() << "stage " << k << " does not output " << c.name;
          continue;
        }
        EXPECT_EQ(it->second.shape, (Shape{T, c.width})) << c.name;
      }
      carry = std::move(out);
    }
    return {};
  }

  const WeightStore& weights_;
  Limits limits_;
  std::vector<Stage> stages_;
};

::testing::AssertionResult identical(const Tensor& got, const Tensor& want, const std::string& what) {
  if (got.shape != want.shape)
    return ::testing::AssertionFailure() << what << ": shape " << shape_str(got.shape) << ", want "
                                         << shape_str(want.shape);
  double max_diff = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    max_diff = std::max(max_diff, std::fabs(double(got.f32()[i]) - double(want.f32()[i])));
  if (std::memcmp(got.f32(), want.f32(), want.numel() * sizeof(float)) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": not bit-identical, max |diff| " << max_diff;
}

std::string describe(const Ranges& r) {
  std::string s;
  for (const auto& [a, b] : r) s += "[" + std::to_string(a) + "," + std::to_string(b) + ")";
  return s;
}

// Prefill of a 7-token prompt, then 4 greedy decode steps, through every
// split in `splits`, each against the unsplit model.
void check_splits(const json& doc, const WeightStore& weights, const std::vector<Ranges>& splits,
                  const std::string& what, const json& sample = kGreedy) {
  const int64_t n_layers = doc["model"]["n_layers"].get<int64_t>();
  const int64_t vocab = doc["model"]["vocab"].get<int64_t>();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 7; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 5) % vocab));

  Pipeline whole(doc, weights, {{0, n_layers}}, 7, sample);
  std::vector<Outputs> want = {whole.prefill(prompt)};
  for (int64_t i = 0; i < 4; ++i)
    want.push_back(whole.decode(static_cast<int32_t>(want.back().at("token").f32()[0]), 7 + i, i + 1));

  for (const Ranges& ranges : splits) {
    const std::string name = what + " " + describe(ranges);
    SCOPED_TRACE(name);
    Pipeline split(doc, weights, ranges, 7, sample);
    Outputs got = split.prefill(prompt);
    EXPECT_TRUE(identical(got.at("logits"), want[0].at("logits"), name + " prefill logits"));
    EXPECT_EQ(got.at("token").f32()[0], want[0].at("token").f32()[0]) << name << " prefill token";
    for (int64_t i = 0; i < 4; ++i) {
      // Both fed the unsplit model's token, so one wrong step does not hide the next.
      got = split.decode(static_cast<int32_t>(want[i].at("token").f32()[0]), 7 + i, i + 1);
      const std::string step = name + " decode " + std::to_string(i + 1);
      EXPECT_TRUE(identical(got.at("logits"), want[i + 1].at("logits"), step + " logits"));
      EXPECT_EQ(got.at("token").f32()[0], want[i + 1].at("token").f32()[0]) << step << " token";
    }
    // Every stage's session holds its own layers' state only, and the
    // token history (penalties) only the last stage's.
    for (size_t k = 0; k < split.stages().size(); ++k) {
      const Stage& s = split.stages()[k];
      for (const auto& [tensor, value] : s.session.tensors) {
        if (tensor == "tokens.history") {
          EXPECT_EQ(k + 1, split.stages().size()) << tensor << " in stage " << k;
          continue;
        }
        ASSERT_EQ(tensor[0], 'L') << tensor;
        const int64_t layer = std::stoll(tensor.substr(1));
        EXPECT_TRUE(layer >= s.first && layer < s.end) << tensor << " in stage " << k << " " << describe(ranges);
      }
    }
  }
}

std::unique_ptr<ir::LocalModel> open_family(const std::string& family, const std::vector<std::string>& args) {
  const fs::path dir = testing::test_model(family, "f32", args);
  if (dir.empty()) return nullptr;
  ir::LocalModel::Options o;
  o.ctx = 64;
  return ir::LocalModel::open((dir / "hf").string(), o);
}

const std::vector<Ranges> kFourLayerSplits = {
    {{0, 1}, {1, 4}}, {{0, 3}, {3, 4}}, {{0, 1}, {1, 3}, {3, 4}}, {{0, 2}, {2, 3}, {3, 4}}};
const std::vector<Ranges> kThreeLayerSplits = {{{0, 1}, {1, 3}}, {{0, 2}, {2, 3}}, {{0, 1}, {1, 2}, {2, 3}}};

struct FamilyCase {
  std::string family;
  std::vector<std::string> args;
};

class StageFamily : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(StageFamily, SplitEqualsWhole) {
  const FamilyCase& c = GetParam();
  auto model = open_family(c.family, c.args);
  ASSERT_TRUE(model) << "could not write the " << c.family << " test model";
  ASSERT_EQ(model->ir()["model"]["n_layers"], 4);
  check_splits(model->ir(), model->weights(), kFourLayerSplits, c.family);
}

INSTANTIATE_TEST_SUITE_P(
    Families, StageFamily,
    ::testing::Values(FamilyCase{"llama", {"--layers", "4"}},
                      FamilyCase{"gemma2", {"--layers", "4", "--sliding-window", "4"}},
                      FamilyCase{"mixtral", {"--layers", "4"}}, FamilyCase{"qwen2_moe", {"--layers", "4"}},
                      FamilyCase{"deepseek_v3", {"--layers", "4"}}, FamilyCase{"lfm2", {"--layers", "4"}},
                      FamilyCase{"jamba", {"--layers", "4"}}, FamilyCase{"mamba2", {"--layers", "4"}}),
    [](const ::testing::TestParamInfo<FamilyCase>& i) { return i.param.family; });

// The hand-written IR test models (goldens/ir_models): a list of every
// layer's output read by the head (depth_attend), shared weights, MLA and
// MoE, every scan and depth_route.
class StageIrModel : public ::testing::TestWithParam<std::string> {};

json ir_model(const std::string& name, WeightStore& weights) {
  const fs::path dir = testing::source_dir() / "goldens" / "ir_models" / name;
  load_safetensors_file((dir / "model.safetensors").string(), weights);
  return testing::read_json(dir / "bonfire.ir.json");
}

TEST_P(StageIrModel, SplitEqualsWhole) {
  WeightStore weights;
  const json doc = ir_model(GetParam(), weights);
  check_splits(doc, weights, kThreeLayerSplits, GetParam());
}

INSTANTIATE_TEST_SUITE_P(IrModels, StageIrModel, ::testing::Values("dense", "mla_moe", "scans"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// What crosses a boundary of the dense model: the residual stream and the
// list of layer outputs, item by item; a middle stage passes the list's
// older entries through and outputs x twice (as x and as the entry it
// appended), each under its own name.
TEST(StageCarry, NamesAndWidths) {
  WeightStore weights;
  const json doc = ir_model("dense", weights);
  const auto names = [](const std::vector<ir::CarryValue>& carry) {
    std::vector<std::string> n;
    for (const auto& c : carry) {
      n.push_back(c.name);
      EXPECT_EQ(c.width, 32) << c.name;
    }
    return n;
  };
  EXPECT_EQ(names(ir::stage_carry(doc, 1, &weights)),
            (std::vector<std::string>{"carry.L1.hs.0", "carry.L1.hs.1", "carry.L1.x"}));
  EXPECT_EQ(names(ir::stage_carry(doc, 2, nullptr)),
            (std::vector<std::string>{"carry.L2.hs.0", "carry.L2.hs.1", "carry.L2.hs.2", "carry.L2.x"}));
  const auto hs = ir::stage_carry(doc, 2, nullptr);
  EXPECT_EQ(hs[2].value, "hs");
  EXPECT_EQ(hs[2].item, 2);
  EXPECT_EQ(hs[3].item, -1);

  ir::LowerOptions o;
  o.mode = "decode";
  o.first_layer = 1;
  o.end_layer = 2;
  const json call = ir::lower(doc, o, &weights);
  EXPECT_EQ(call["outputs"], json({"carry.L2.hs.0", "carry.L2.hs.1", "carry.L2.hs.2", "carry.L2.x"}));
  // Stages 1.. have no embed nodes; stages before the last no head.
  for (const auto& n : call["nodes"]) {
    const std::string id = n["id"];
    EXPECT_TRUE(id.rfind("L1.", 0) == 0 || id.rfind("carry.L2.", 0) == 0) << id;
  }
}

void expect_bad_graph(const std::function<void()>& f, const std::string& what, const std::string& needle = "") {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::BadGraph) << what << ": " << e.what();
    if (!needle.empty()) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what();
    }
  }
}

TEST(StageRanges, BadRangesAreRefused) {
  WeightStore weights;
  const json doc = ir_model("dense", weights);  // 3 layers
  for (const auto& [first, end] : std::vector<std::pair<int64_t, int64_t>>{
           {-1, 2}, {2, 2}, {2, 1}, {3, -1}, {0, 4}, {0, 0}, {1, -2}, {5, 7}}) {
    ir::LowerOptions o;
    o.first_layer = first;
    o.end_layer = end;
    expect_bad_graph([&] { ir::lower(doc, o, &weights); },
                     "[" + std::to_string(first) + ", " + std::to_string(end) + ")", "first_layer");
  }
  for (int64_t b : {-1, 0, 3, 4}) expect_bad_graph([&] { ir::stage_carry(doc, b, &weights); }, "boundary " + std::to_string(b));
}

// A layer reading an earlier layer's KV cache (kv_from) cannot be cut from
// it: its stage's session would not hold the cache. Boundaries elsewhere work.
TEST(StageRanges, SharedKvAcrossTheBoundaryIsRefused) {
  WeightStore weights;
  json doc = ir_model("dense", weights);
  doc["block"]["state"][0]["kv_from"] = {{"per_layer", {nullptr, 0, nullptr}}};
  for (const auto& [first, end] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {0, 1}, {1, 2}}) {
    ir::LowerOptions o;
    o.first_layer = first;
    o.end_layer = end;
    expect_bad_graph([&] { ir::lower(doc, o, &weights); }, "kv_from split " + std::to_string(first),
                     "$.block.nodes[5]: on layer 1 it reads the KV cache of layer 0 (kv_from of the slot \"kv\"): the "
                     "model cannot be split at layer 1");
  }
  expect_bad_graph([&] { ir::stage_carry(doc, 1, &weights); }, "stage_carry at 1", "cannot be split at layer 1");
  check_splits(doc, weights, {{{0, 2}, {2, 3}}}, "dense kv_from");
}

// A model without any session state: no stage retains anything, and the
// split still equals the whole.
TEST(StageRanges, StagesWithoutState) {
  const int64_t V = 16, D = 8, L = 3;
  json doc = {{"ir_version", 1},
              {"family_hint", "test"},
              {"model", {{"vocab", V}, {"d", D}, {"n_layers", L}, {"ctx", 64}}},
              {"embed", {{"nodes", {{{"op", "embedding"}, {"in", {"tokens"}}, {"out", "x"}, {"weight", "emb"}}}}}},
              {"block",
               {{"repeat", L},
                {"nodes",
                 {{{"op", "rmsnorm"}, {"in", {"x"}}, {"out", "h"}, {"weight", "l.{i}.norm"}, {"eps", 1e-6}},
                  {{"op", "linear"}, {"in", {"h"}}, {"out", "u"}, {"weight", "l.{i}.w"}},
                  {{"op", "silu"}, {"in", {"u"}}, {"out", "u"}},
                  {{"op", "add"}, {"in", {"x", "u"}}, {"out", "x"}}}}}},
              {"head",
               {{"nodes",
                 {{{"op", "rmsnorm"}, {"in", {"x"}}, {"out", "y"}, {"weight", "norm"}, {"eps", 1e-6}},
                  {{"op", "linear"}, {"in", {"y"}}, {"out", "logits"}, {"weight", "emb"}}}}}}};
  WeightStore weights;
  uint32_t seed = 1;
  auto random = [&](Shape shape) {
    Tensor t = Tensor::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      seed = seed * 1664525u + 1013904223u;
      t.f32()[i] = float(int(seed >> 9) % 2001 - 1000) / 1000.f;
    }
    return t;
  };
  weights.add("emb", random({V, D}), "test");
  weights.add("norm", random({D}), "test");
  for (int64_t l = 0; l < L; ++l) {
    weights.add("l." + std::to_string(l) + ".norm", random({D}), "test");
    weights.add("l." + std::to_string(l) + ".w", random({D, D}), "test");
  }
  Pipeline p(doc, weights, {{0, 1}, {1, 2}, {2, 3}}, 7, kGreedy);
  for (const Stage& s : p.stages()) {
    EXPECT_FALSE(s.prefill_json.contains("retain")) << s.first;
    EXPECT_FALSE(s.decode_json.contains("retain")) << s.first;
  }
  check_splits(doc, weights, {{{0, 1}, {1, 2}, {2, 3}}, {{0, 2}, {2, 3}}}, "stateless");
}

// A worker holding only its stage's layers lowers the stage as one holding
// the whole checkpoint does: the earlier layers are walked, not emitted.
TEST(StageRanges, NeedsOnlyTheStagesWeights) {
  auto model = open_family("llama", {"--layers", "4"});
  ASSERT_TRUE(model);
  WeightStore part;
  for (const auto& name : model->weights().names())
    if (name.rfind("model.layers.0.", 0) != 0 && name.rfind("model.layers.1.", 0) != 0)
      part.add(name, *model->weights().find(name), "test");
  ASSERT_LT(part.size(), model->weights().size());
  ir::LowerOptions o;
  o.mode = "prefill";
  o.tokens = 7;
  o.first_layer = 2;
  o.sample = kGreedy;
  EXPECT_EQ(ir::lower(model->ir(), o, &part), ir::lower(model->ir(), o, &model->weights()));
  const auto carry = ir::stage_carry(model->ir(), 2, &part);
  ASSERT_EQ(carry.size(), 1u);
  EXPECT_EQ(carry[0].name, "carry.L2.x");
  EXPECT_EQ(carry[0].width, model->ir()["model"]["d"]);
  o.first_layer = 1;
  expect_bad_graph([&] { ir::lower(model->ir(), o, &part); }, "stage 1 without layer 1's weights",
                   "model.layers.1.");
}

// Penalties keep a token history in the session: the last stage's only.
TEST(StageRanges, PenaltiesInTheLastStage) {
  auto model = open_family("llama", {"--layers", "4"});
  ASSERT_TRUE(model);
  const json sample = {{"temperature", 0.8}, {"seed", 3}, {"repetitionPenalty", 1.3}, {"penaltyWindow", 64}};
  check_splits(model->ir(), model->weights(), {{{0, 2}, {2, 4}}, {{0, 1}, {1, 2}, {2, 4}}}, "llama penalties", sample);
}

}  // namespace
}  // namespace bonfire
