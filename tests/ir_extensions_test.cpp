// IR extensions (src/ir/extensions.h, docs/IR.md §17): a document declares
// what it uses beyond v1; an unknown one is refused naming it; layer_apply
// lets stateful nodes run on some layers only, and then a layer keeps only
// the state its nodes use. LFM2 (attention and short-convolution layers)
// is the family that needs it; its generation against llama.cpp is in
// generate_golden_test.cpp and its pipeline splits in ir_stages_test.cpp.
#include <gtest/gtest.h>

#include "golden_util.h"
#include "ir/extensions.h"
#include "ir/generation.h"
#include "ir/lower.h"
#include "ir/validate.h"
#include "test_models.h"

namespace bonfire {
namespace {

using json = nlohmann::json;

json llama_doc() { return testing::read_json(testing::source_dir() / "tests" / "ir" / "docs" / "llama.json"); }

// The llama document with its attention node applied on layer 0 only.
json attention_on_first_layer() {
  json d = llama_doc();
  for (auto& n : d["block"]["nodes"])
    if (n["op"] == "attention") n["apply"] = {{"per_layer", {true, false}}};
  return d;
}

std::string dump(const std::vector<ir::IrProblem>& ps) {
  std::string s;
  for (const auto& p : ps) s += "  " + ir::format_problem(p) + "\n";
  return s.empty() ? "  (no problems)\n" : s;
}

bool has(const std::vector<ir::IrProblem>& ps, int rule, const std::string& path, const std::string& words) {
  for (const auto& p : ps)
    if (p.rule == rule && p.path == path && p.message.find(words) != std::string::npos) return true;
  return false;
}

TEST(IrExtensions, ApplyOnAStatefulNodeNeedsLayerApply) {
  const json d = attention_on_first_layer();
  const auto problems = ir::validate_ir(d);
  EXPECT_TRUE(has(problems, 19, "$.block.nodes[5].apply", "needs the extension layer_apply")) << dump(problems);

  json declared = d;
  declared["extensions"] = {{"layer_apply", 1}};
  EXPECT_TRUE(ir::validate_ir(declared).empty()) << dump(ir::validate_ir(declared));
  // A v1 document is still read as v1: the plain llama document is valid.
  EXPECT_TRUE(ir::validate_ir(llama_doc()).empty());
}

TEST(IrExtensions, AnUnknownExtensionIsRefusedByName) {
  json d = attention_on_first_layer();
  d["extensions"] = {{"layer_apply", 1}, {"ring_windows", 1}};
  auto problems = ir::validate_ir(d);
  ASSERT_EQ(problems.size(), 1u) << dump(problems);
  EXPECT_TRUE(has(problems, 19, "$.extensions.ring_windows", "\"ring_windows\", which this reader does not know")) << dump(problems);

  d["extensions"] = {{"layer_apply", 2}};
  problems = ir::validate_ir(d);
  EXPECT_TRUE(has(problems, 19, "$.extensions.layer_apply", "version 2")) << dump(problems);

  d["extensions"] = json::array({"layer_apply"});
  problems = ir::validate_ir(d);
  EXPECT_TRUE(has(problems, 19, "$.extensions", "expected an object")) << dump(problems);
}

TEST(IrExtensions, ApplyValuesAreBooleansPerLayer) {
  json d = attention_on_first_layer();
  d["extensions"] = {{"layer_apply", 1}};
  d["block"]["nodes"][5]["apply"] = {{"per_layer", {true, 3}}};
  auto problems = ir::validate_ir(d);
  EXPECT_TRUE(has(problems, 19, "$.block.nodes[5].apply", "per_layer booleans")) << dump(problems);
  d["block"]["nodes"][5]["apply"] = {{"per_layer", {true, false, true}}};  // 3 entries for 2 layers
  problems = ir::validate_ir(d);
  EXPECT_TRUE(has(problems, 2, "$.block.nodes[5].apply.per_layer", "3 entries")) << dump(problems);
}

// LFM2's document from its HF folder: attention and convolution layers in
// one block under layer_apply, and each layer's session holds only what its
// own kind of layer keeps.
TEST(IrExtensions, Lfm2LayersKeepOnlyTheirOwnState) {
  const auto dir = testing::test_model("lfm2", "f32", {"--layers", "4"});
  ASSERT_FALSE(dir.empty()) << "could not write the lfm2 test model";
  ir::LocalModel::Options o;
  o.ctx = 64;
  auto model = ir::LocalModel::open((dir / "hf").string(), o);
  const json& doc = model->ir();
  ASSERT_TRUE(ir::uses_extension(doc, "layer_apply")) << doc.dump();
  EXPECT_TRUE(ir::validate_ir(doc, &model->weights()).empty()) << dump(ir::validate_ir(doc, &model->weights()));

  ir::LowerOptions lo;
  lo.mode = "prefill";
  lo.tokens = 3;
  lo.ctx = 64;
  const json call = ir::lower(doc, lo, &model->weights());
  std::set<std::string> kept;
  for (const auto& [name, ref] : call["retain"].items()) kept.insert(name);
  // The writer alternates: conv on even layers, attention on odd ones.
  const std::set<std::string> want = {"L0.conv.conv", "L1.kv.k", "L1.kv.v", "L2.conv.conv", "L3.kv.k", "L3.kv.v"};
  EXPECT_EQ(kept, want);
}

// An op the v1 schema lacks (ssd_scan, Mamba-2's scan) is refused without
// its extension, naming it; with it, the op's own fields are checked.
TEST(IrExtensions, AnOpFromAnExtension) {
  const auto dir = testing::test_model("mamba2", "f32", {});
  ASSERT_FALSE(dir.empty()) << "could not write the mamba2 test model";
  ir::LocalModel::Options o;
  o.ctx = 64;
  auto model = ir::LocalModel::open((dir / "hf").string(), o);
  json doc = model->ir();
  ASSERT_TRUE(ir::uses_extension(doc, "ssd_scan"));
  EXPECT_TRUE(ir::validate_ir(doc, &model->weights()).empty()) << dump(ir::validate_ir(doc, &model->weights()));
  size_t at = 0;
  for (size_t k = 0; k < doc["block"]["nodes"].size(); ++k)
    if (doc["block"]["nodes"][k]["op"] == "ssd_scan") at = k;
  const std::string path = "$.block.nodes[" + std::to_string(at) + "]";

  json plain = doc;
  plain.erase("extensions");
  auto problems = ir::validate_ir(plain);
  EXPECT_TRUE(has(problems, 19, path + ".op", "needs the extension ssd_scan")) << dump(problems);

  json broken = doc;
  broken["block"]["nodes"][at].erase("d_state");
  broken["block"]["nodes"][at]["heads"] = -2;
  broken["block"]["nodes"][at]["chunk"] = 64;
  problems = ir::validate_ir(broken);
  EXPECT_TRUE(has(problems, 19, path + ".d_state", "(missing)")) << dump(problems);
  EXPECT_TRUE(has(problems, 19, path + ".heads", "a positive integer")) << dump(problems);
  EXPECT_TRUE(has(problems, 19, path + ".chunk", "no field")) << dump(problems);
}

}  // namespace
}  // namespace bonfire
