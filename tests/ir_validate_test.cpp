// `bonfire ir validate`: the schema check against python-jsonschema's
// verdicts (goldens/ir_schema/cases.jsonl, scripts/gen_ir_schema_goldens.py),
// every rule R1..R18 of docs/IR.md broken in an otherwise valid document
// (tests/ir/docs/), R18 against a real checkpoint, and the command line.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "golden_util.h"
#include "ir/extensions.h"
#include "ir/op_table.h"
#include "ir/schema_check.h"
#include "ir/validate.h"
#include "model/model_files.h"
#include "spec/manifest.h"
#include "test_models.h"

namespace bonfire {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using ir::IrProblem;

const char* const kDocs[] = {"llama", "sliding", "moe", "mla", "all_ops"};

json load(const std::string& name) {
  return testing::read_json(testing::source_dir() / "tests" / "ir" / "docs" / (name + ".json"));
}

std::string dump(const std::vector<IrProblem>& ps) {
  std::string s;
  for (const auto& p : ps) s += "  " + ir::format_problem(p) + "\n";
  return s.empty() ? "  (no problems)\n" : s;
}

// The first block/embed/head node with this op (nth: the nth such node).
json& node(json& d, const std::string& section, const std::string& op, int nth = 0) {
  for (auto& n : d[section]["nodes"])
    if (n["op"] == op && nth-- == 0) return n;
  throw std::runtime_error("no " + op + " node in " + section);
}

// Problems of `d` include `rule` at a path starting with `path`, and the schema passed.
::testing::AssertionResult breaks(const json& d, int rule, const std::string& path = "$",
                                  const WeightStore* weights = nullptr, const std::string& text = "") {
  const auto ps = ir::validate_ir(d, weights);
  for (const auto& p : ps)
    if (p.rule == rule && p.path.rfind(path, 0) == 0 && p.message.find(text) != std::string::npos)
      return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no rule R" << rule << " problem at " << path
                                       << (text.empty() ? "" : " mentioning \"" + text + "\"") << "; got:\n"
                                       << dump(ps);
}

// ---- schema ---------------------------------------------------------------

TEST(IrValidateSchema, GoldensAgreeWithJsonschemaDraft202012) {
  std::ifstream f(testing::source_dir() / "goldens" / "ir_schema" / "cases.jsonl");
  ASSERT_TRUE(f) << "missing goldens/ir_schema/cases.jsonl (scripts/gen_ir_schema_goldens.py)";
  std::string line;
  int n = 0, valid = 0, disagree = 0;
  while (std::getline(f, line)) {
    const json c = json::parse(line);
    const auto problems = ir::check_schema(c["doc"]);
    const bool ok = problems.empty();
    const bool want = c["valid"].get<bool>();
    ++n;
    valid += want;
    if (ok != want) {
      ++disagree;
      std::string first = problems.empty() ? "(none)" : problems[0].path + ": " + problems[0].message;
      ADD_FAILURE() << c["id"].get<std::string>() << " (" << c["mutation"].get<std::string>() << "): jsonschema says "
                    << (want ? "valid" : "invalid") << ", check_schema says " << (ok ? "valid" : "invalid: " + first);
    }
  }
  EXPECT_GE(n, 600);
  EXPECT_GE(valid, 150);
  EXPECT_GE(n - valid, 150);
  EXPECT_EQ(disagree, 0) << "of " << n;
}

TEST(IrValidateSchema, ReportsTheInnermostProblem) {
  {
    json d = load("llama");
    node(d, "block", "attention")["heads"] = 0;  // anyOf [posint, per_layer]
    const auto ps = ir::check_schema(d);
    ASSERT_EQ(ps.size(), 1u) << dump(ir::validate_ir(d));
    EXPECT_EQ(ps[0].path, "$.block.nodes[5].heads");
    EXPECT_NE(ps[0].message.find("greater than or equal to 1"), std::string::npos) << ps[0].message;
  }
  {
    json d = load("llama");
    d["block"]["nodes"][3].erase("op");  // every `if op == ...` then matches
    const auto ps = ir::check_schema(d);
    ASSERT_EQ(ps.size(), 1u) << dump(ir::validate_ir(d));
    EXPECT_EQ(ps[0].path, "$.block.nodes[3]");
    EXPECT_NE(ps[0].message.find("'op'"), std::string::npos) << ps[0].message;
  }
  {
    json d = load("llama");
    d["block"]["nodes"][1]["bogus"] = 1;
    const auto ps = ir::check_schema(d);
    ASSERT_EQ(ps.size(), 1u) << dump(ir::validate_ir(d));
    EXPECT_EQ(ps[0].path, "$.block.nodes[1].bogus");
  }
  {
    json d = load("llama");
    d["tokenizer"]["bos"] = "1";
    const auto ps = ir::check_schema(d);
    ASSERT_EQ(ps.size(), 1u) << dump(ir::validate_ir(d));
    EXPECT_EQ(ps[0].path, "$.tokenizer.bos");
    EXPECT_NE(ps[0].message.find("found string"), std::string::npos) << ps[0].message;
  }
  {
    json d = load("sliding");
    node(d, "block", "rope")["pairing"] = "gptj";
    const auto ps = ir::check_schema(d);
    ASSERT_EQ(ps.size(), 1u) << dump(ir::validate_ir(d));
    EXPECT_EQ(ps[0].path, "$.block.nodes[6].pairing");
    EXPECT_NE(ps[0].message.find("enum"), std::string::npos) << ps[0].message;
  }
}

TEST(IrValidateSchema, TwentyTwelveMeaning) {
  json d = load("llama");
  node(d, "block", "attention")["heads"] = 4.0;  // an integer in 2020-12
  d["block"]["state"][0]["_why"] = {{"any", "prose"}};
  d["model"]["_"] = 3;
  EXPECT_TRUE(ir::check_schema(d).empty()) << dump(ir::validate_ir(d));
  EXPECT_TRUE(ir::validate_ir(d).empty()) << dump(ir::validate_ir(d));
  node(d, "block", "attention")["heads"] = 4.5;
  EXPECT_FALSE(ir::check_schema(d).empty());
}

TEST(IrValidate, ValidDocumentsHaveNoProblems) {
  for (const char* name : kDocs) {
    const auto ps = ir::validate_ir(load(name));
    EXPECT_TRUE(ps.empty()) << name << ":\n" << dump(ps);
  }
}

TEST(IrValidate, NeverThrowsOnTheGoldenVariants) {
  // Schema-valid variants reach every rule with dropped, duplicated and rewrapped nodes.
  std::ifstream f(testing::source_dir() / "goldens" / "ir_schema" / "cases.jsonl");
  std::string line;
  int checked = 0;
  while (std::getline(f, line)) {
    const json c = json::parse(line);
    EXPECT_NO_THROW(ir::validate_ir(c["doc"])) << c["id"];
    ++checked;
  }
  EXPECT_GT(checked, 0);
  // Absurd nesting is refused, not recursed into.
  json deep = load("llama");
  json* at = &deep["_deep"];
  for (int i = 0; i < 5000; ++i) at = &((*at)["x"] = json::object());
  const auto ps = ir::validate_ir(deep);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].rule, 0);
  // Sizes that would overflow are unknown, not wrapped.
  json big = load("all_ops");
  node(big, "block", "attention")["heads"] = int64_t(1) << 62;
  node(big, "block", "attention")["head_dim"] = int64_t(1) << 62;
  node(big, "block", "recurrence")["index"] = {{"c", int64_t(1) << 62}, {"k", int64_t(1) << 62}};
  EXPECT_NO_THROW(ir::validate_ir(big));
  json layers = load("llama");
  layers["model"]["n_layers"] = int64_t(1) << 40;
  layers["block"]["repeat"] = int64_t(1) << 40;
  EXPECT_NO_THROW(ir::validate_ir(layers));
}

TEST(IrValidate, AllOpsDocumentUsesEveryOp) {
  std::set<std::string> used;
  const json d = load("all_ops");
  for (const char* sec : {"embed", "block", "head"})
    for (const auto& n : d[sec]["nodes"]) used.insert(n["op"].get<std::string>());
  for (const auto& op : spec::ir_schema()["$defs"]["node"]["properties"]["op"]["enum"])
    EXPECT_TRUE(used.count(op.get<std::string>())) << op;
}

// The op table (ir/op_table.h) defines exactly the schema's ops and the ops
// of known extensions, each with its widths and its lowering, so neither
// walk meets an op it cannot handle.
TEST(IrOpTable, DefinesExactlyTheSchemasOps) {
  std::set<std::string> schema, table;
  for (const auto& op : spec::ir_schema()["$defs"]["node"]["properties"]["op"]["enum"]) schema.insert(op.get<std::string>());
  for (const auto& def : ir::ir_op_table()) {
    EXPECT_TRUE(table.insert(def.name).second) << def.name << " is defined twice";
    EXPECT_TRUE(def.widths && def.lower) << def.name << " lacks its widths or its lowering";
    EXPECT_EQ(ir::find_ir_op(def.name), &def);
    if (!def.extension) continue;
    EXPECT_FALSE(schema.count(def.name)) << def.name << " is in the v1 schema but marked as an extension's";
    bool known = false;
    for (const auto& e : ir::ir_extensions()) known = known || def.extension == std::string(e.name);
    EXPECT_TRUE(known) << def.name << " names the unknown extension " << def.extension;
    table.erase(def.name);
  }
  EXPECT_EQ(table, schema);
  EXPECT_EQ(ir::find_ir_op("no_such_op"), nullptr);
}

TEST(IrValidate, SchemaFailureStopsTheRules) {
  json d = load("llama");
  d["ir_version"] = 2;                           // R1
  node(d, "block", "attention")["heads"] = -4;  // schema
  const auto ps = ir::validate_ir(d);
  ASSERT_FALSE(ps.empty());
  for (const auto& p : ps) EXPECT_EQ(p.rule, 0) << ir::format_problem(p);
}

// ---- R1..R17 --------------------------------------------------------------

TEST(IrValidate, R1Version) {
  json d = load("llama");
  d["ir_version"] = 2;
  EXPECT_TRUE(breaks(d, 1, "$.ir_version"));
}

TEST(IrValidate, R2LayerCounts) {
  json d = load("llama");
  d["block"]["repeat"] = 3;
  EXPECT_TRUE(breaks(d, 2, "$.block.repeat"));
  json s = load("sliding");
  s["block"]["state"][0]["window"]["per_layer"] = {128, 0, 128};
  EXPECT_TRUE(breaks(s, 2, "$.block.state[0].window.per_layer"));
}

TEST(IrValidate, R3PerLayerEntries) {
  json s = load("sliding");
  node(s, "block", "attention")["kv_heads"]["per_layer"][2] = "two";
  EXPECT_TRUE(breaks(s, 3, "$.block.nodes[7].kv_heads.per_layer[2]"));
  json t = load("sliding");
  node(t, "block", "rope")["pairing"] = {{"per_layer", {"neox", "neox", "gptj", "neox"}}};
  EXPECT_TRUE(breaks(t, 3, "$.block.nodes[6].pairing.per_layer[2]"));
  json u = load("sliding");
  u["block"]["weight_index"]["per_layer"][3] = 4;
  EXPECT_TRUE(breaks(u, 3, "$.block.weight_index.per_layer[3]"));
  json v = load("moe");
  node(v, "block", "linear", 3)["apply"]["per_layer"][1] = 0;  // a boolean field
  EXPECT_TRUE(breaks(v, 3, "$.block.nodes[9].apply.per_layer[1]"));
}

TEST(IrValidate, R4NamesAreDefinedBeforeRead) {
  json d = load("llama");
  d["block"]["nodes"][0]["in"] = {"y"};
  EXPECT_TRUE(breaks(d, 4, "$.block.nodes[0].in[0]"));
  // The dense MLP defines g on layer 0 only; without it layer 0's silu reads nothing.
  json m = load("moe");
  node(m, "block", "linear", 2)["apply"] = {{"per_layer", {false, true, false}}};
  EXPECT_TRUE(breaks(m, 4, "$.block.nodes[10].in[0]", nullptr, "on layer 0"));
  // Read in embed, defined only in block.
  json e = load("all_ops");
  node(e, "embed", "list")["in"] = {"x", "rr"};
  EXPECT_TRUE(breaks(e, 4, "$.embed.nodes[3].in[1]"));
}

TEST(IrValidate, R5OutCounts) {
  json m = load("moe");
  node(m, "block", "split")["out"] = {"q", "k"};
  EXPECT_TRUE(breaks(m, 5, "$.block.nodes[2].out"));
  json d = load("llama");
  node(d, "block", "rope")["out"] = {"q", "q"};
  EXPECT_TRUE(breaks(d, 5, "$.block.nodes[4].out"));
}

TEST(IrValidate, R6InputCountsAndLists) {
  json d = load("llama");
  node(d, "block", "add")["in"] = {"x"};
  EXPECT_TRUE(breaks(d, 6, "$.block.nodes[7].in"));
  json a = load("llama");
  node(a, "block", "attention")["in"] = {"q", "k"};
  EXPECT_TRUE(breaks(a, 6, "$.block.nodes[5].in"));
  json o = load("all_ops");
  node(o, "block", "add")["in"] = {"hs", "o"};  // a list read by add
  EXPECT_TRUE(breaks(o, 6, "$.block.nodes[7].in[0]"));
  json p = load("all_ops");
  node(p, "block", "append")["in"] = {"x", "x"};  // append needs a list first
  EXPECT_TRUE(breaks(p, 6, "$.block.nodes[47].in[0]"));
}

TEST(IrValidate, MlaWithQInTwoParts) {
  // [q_nope, q_pe, c, k_pe], as ir from-hf writes DeepSeek (docs/IR.md §7, R6).
  json d = load("mla");
  auto& nodes = d["block"]["nodes"];
  nodes[4] = {{"op", "split"}, {"in", {"q"}}, {"out", {"q_nope", "q_pe"}}, {"sizes", {16, 8}}, {"groups", 4}};
  nodes.insert(nodes.begin() + 5, json{{"op", "rope"}, {"in", {"q_pe"}}, {"out", {"q_pe"}}, {"heads", 4}, {"head_dim", 8},
                                       {"theta", 10000.0}, {"rope_heads", "all"}, {"pairing", "interleaved"}});
  node(d, "block", "mla_attention")["in"] = {"q_nope", "q_pe", "c", "k_pe"};
  EXPECT_TRUE(ir::validate_ir(d).empty()) << dump(ir::validate_ir(d));
  node(d, "block", "split", 0)["sizes"] = {8, 16};  // q_nope 32 wide, needs heads*qk_nope = 64
  EXPECT_TRUE(breaks(d, 10, "$.block.nodes[10].in[0]"));
}

TEST(IrValidate, R7WeightNamePlaceholders) {
  json d = load("llama");
  node(d, "head", "rmsnorm")["weight"] = "model.layers.{i}.norm.weight";
  EXPECT_TRUE(breaks(d, 7, "$.head.nodes[0].weight"));
  json m = load("moe");
  node(m, "block", "moe_ffn")["experts"]["up"] = "model.layers.{i}.mlp.experts.up_proj.weight";
  EXPECT_TRUE(breaks(m, 7, "$.block.nodes[13].experts.up"));
  json n = load("moe");
  node(n, "block", "moe_ffn")["router"] = "model.layers.{i}.mlp.gate.{e}.weight";
  EXPECT_TRUE(breaks(n, 7, "$.block.nodes[13].router"));
  json u = load("llama");
  node(u, "block", "linear")["weight"] = "model.layers.{layer}.q_proj.weight";
  EXPECT_TRUE(breaks(u, 7, "$.block.nodes[1].weight"));
}

TEST(IrValidate, R8StateSlots) {
  json d = load("llama");
  node(d, "block", "attention")["state"] = "cache";
  EXPECT_TRUE(breaks(d, 8, "$.block.nodes[5].state"));
  json o = load("all_ops");
  node(o, "block", "attention")["state"] = "la";  // a recurrent slot
  EXPECT_TRUE(breaks(o, 8, "$.block.nodes[4].state"));
  json p = load("all_ops");
  node(p, "block", "ssm_scan")["state"] = "conv";  // owned by conv1d_causal
  EXPECT_TRUE(breaks(p, 8, "$.block.nodes[30].state"));
  json q = load("all_ops");
  q["block"]["state"][3]["name"] = "la";
  EXPECT_TRUE(breaks(q, 8, "$.block.state[3].name"));
  json r = load("all_ops");
  r["block"]["state"][6]["tensors"][1]["name"] = "h";
  EXPECT_TRUE(breaks(r, 8, "$.block.state[6].tensors[1].name"));
  json s = load("all_ops");
  node(s, "head", "linear")["_"] = "x";
  s["head"]["nodes"].push_back({{"op", "ssm_scan"}, {"in", {"hn"}}, {"out", "z"}, {"state", "ssm"}, {"n", 4},
                                {"a", "a"}, {"b", "b"}, {"c", "c"}, {"d", "d"}});
  EXPECT_TRUE(breaks(s, 8, "$.head.nodes[4].state"));
}

TEST(IrValidate, R9Heads) {
  json d = load("llama");
  d["block"]["state"][0]["kv_heads"] = 3;
  EXPECT_TRUE(breaks(d, 9, "$.block.state[0]"));
  json a = load("llama");
  node(a, "block", "attention")["head_dim"] = 8;
  EXPECT_TRUE(breaks(a, 9, "$.block.nodes[5].head_dim"));
  json r = load("llama");
  node(r, "block", "rope")["kv_heads"] = 3;
  EXPECT_TRUE(breaks(r, 9, "$.block.nodes[4].kv_heads"));
}

TEST(IrValidate, R10Widths) {
  // v comes out of split 16 wide; attention needs kv_heads*head_dim = 32.
  json m = load("moe");
  node(m, "block", "split")["sizes"] = {32, 32, 16};
  EXPECT_TRUE(breaks(m, 10, "$.block.nodes[4].in[2]", nullptr, "32"));
  // mul_col's second input must be one value per row; xn is the hidden width (32).
  json o = load("all_ops");
  node(o, "block", "mul_col")["in"] = {"x", "xn"};
  EXPECT_TRUE(breaks(o, 10, "$.block.nodes[23].in[1]"));
  // add: q (heads*head_dim = 64) plus x (model.d = 48) in the MLA model.
  json a = load("mla");
  node(a, "block", "add")["in"] = {"x", "q"};
  EXPECT_TRUE(breaks(a, 10, "$.block.nodes[11].in[1]", nullptr, "96"));
  // split with groups: the input must be sum(sizes) * groups, fixed here by rope's heads*head_dim.
  json g = load("all_ops");
  node(g, "block", "split")["sizes"] = {8, 8, 4};
  EXPECT_TRUE(breaks(g, 10, "$.block.nodes[4].in[2]"));
  // The hidden state leaves a layer model.d wide: a layer that ends on the 64-wide MLP.
  json h = load("all_ops");
  node(h, "block", "add", 4)["in"] = {"up", "down"};  // x = up + down: up is unknown, so nothing to report...
  EXPECT_TRUE(ir::validate_ir(h).empty()) << dump(ir::validate_ir(h));
  node(h, "block", "linear", 2)["weight"] = "w";  // ...until something fixes it: rope's q is 32, attention out 32.
  node(h, "block", "add", 4)["in"] = {"a", "o"};
  EXPECT_TRUE(ir::validate_ir(h).empty()) << dump(ir::validate_ir(h));
  json k = load("mla");
  node(k, "block", "add", 1)["in"] = {"a", "f"};  // x = a + f: a is heads*v_head_dim = 48 = d: fine
  EXPECT_TRUE(ir::validate_ir(k).empty()) << dump(ir::validate_ir(k));
  node(k, "block", "add", 1)["in"] = {"q", "f"};  // x = q + f: 96 wide, but the layer keeps x model.d = 48 wide
  EXPECT_TRUE(breaks(k, 10, "$.block.nodes[18]", nullptr, "model.d"));
  // A grouped rmsnorm over a width its group does not divide.
  json s = load("sliding");
  node(s, "block", "rmsnorm", 1)["group"] = 24;
  node(s, "block", "rmsnorm", 1)["_"] = "q is 64 wide";
  EXPECT_TRUE(breaks(s, 10, "$.block.nodes[4].group"));
}

TEST(IrValidate, R11Rope) {
  json d = load("llama");
  node(d, "block", "rope")["rope_heads"] = "first";
  EXPECT_TRUE(breaks(d, 11, "$.block.nodes[4].rope_heads"));
  node(d, "block", "rope")["n_rot"] = 7;
  EXPECT_TRUE(breaks(d, 11, "$.block.nodes[4].n_rot", nullptr, "odd"));
  node(d, "block", "rope")["n_rot"] = 32;
  EXPECT_TRUE(breaks(d, 11, "$.block.nodes[4].n_rot", nullptr, "head_dim"));
  json a = load("llama");
  node(a, "block", "rope")["n_rot"] = 8;  // rope_heads "all"
  EXPECT_TRUE(breaks(a, 11, "$.block.nodes[4].n_rot"));
  json t = load("llama");
  node(t, "block", "rope")["theta"] = 0;
  EXPECT_TRUE(breaks(t, 11, "$.block.nodes[4].theta"));
  json m = load("moe");
  node(m, "block", "rope")["freq_factors"] = {1.0, 1.0, 1.0};
  EXPECT_TRUE(breaks(m, 11, "$.block.nodes[3].freq_factors"));
}

TEST(IrValidate, R12KvSlots) {
  json d = load("llama");
  d["block"]["state"][0]["max_len"] = 1024;  // < ctx, no window
  EXPECT_TRUE(breaks(d, 12, "$.block.state[0].max_len"));
  json w = load("sliding");
  w["block"]["state"][0]["window"] = {{"per_layer", {256, 0, 256, 0}}};
  EXPECT_TRUE(breaks(w, 12, "$.block.state[0].window"));
  json s = load("sliding");
  s["block"]["state"][0]["sinks"] = {{"per_layer", {4, 0, 200, 0}}};
  EXPECT_TRUE(breaks(s, 12, "$.block.state[0].sinks"));
  json f = load("llama");
  f["block"]["state"][0]["kv_from"] = {{"per_layer", {0, nullptr}}};  // layer 0 reads itself
  EXPECT_TRUE(breaks(f, 12, "$.block.state[0].kv_from"));
  json g = load("sliding");
  g["block"]["state"][0]["kv_from"] = {{"per_layer", {nullptr, nullptr, 0, 0}}};  // layer 3 (4096) reads layer 0 (128)
  EXPECT_TRUE(breaks(g, 12, "$.block.state[0].kv_from", nullptr, "shape"));
  json h = load("llama");
  h["block"]["state"][0]["kv_from"] = {{"per_layer", {nullptr, "zero"}}};
  EXPECT_TRUE(breaks(h, 12, "$.block.state[0].kv_from"));
}

TEST(IrValidate, R13Moe) {
  json m = load("moe");
  node(m, "block", "moe_ffn")["top_k"] = 9;
  EXPECT_TRUE(breaks(m, 13, "$.block.nodes[13].top_k"));
  json g = load("moe");
  node(g, "block", "moe_ffn")["groups"] = {{"n", 3}, {"top", 2}};
  EXPECT_TRUE(breaks(g, 13, "$.block.nodes[13].groups.n"));
  json t = load("moe");
  node(t, "block", "moe_ffn")["groups"] = {{"n", 4}, {"top", 5}};
  EXPECT_TRUE(breaks(t, 13, "$.block.nodes[13].groups.top"));
  json k = load("moe");
  node(k, "block", "moe_ffn")["groups"] = {{"n", 4}, {"top", 1}};
  node(k, "block", "moe_ffn")["top_k"] = 3;  // only 2 experts in one group
  EXPECT_TRUE(breaks(k, 13, "$.block.nodes[13].top_k"));
}

TEST(IrValidate, R14Mla) {
  json a = load("mla");
  a["block"]["state"][0]["head_dim"] = 48;
  EXPECT_TRUE(breaks(a, 14, "$.block.nodes[9].state"));
  json b = load("mla");
  node(b, "block", "mla_attention")["qk_rope"] = 7;
  EXPECT_TRUE(breaks(b, 14, "$.block.nodes[9].qk_rope"));
}

TEST(IrValidate, R15Expressions) {
  json m = load("moe");
  node(m, "block", "expr")["expr"] = "silu(a) * ";
  EXPECT_TRUE(breaks(m, 15, "$.block.nodes[17].expr", nullptr, "character"));
  json n = load("moe");
  node(n, "block", "expr")["expr"] = "silu(a) * c";
  EXPECT_TRUE(breaks(n, 15, "$.block.nodes[17].expr", nullptr, "\"c\""));
  json f = load("moe");
  node(f, "block", "expr")["expr"] = "gelu(a) * x1";
  EXPECT_TRUE(breaks(f, 15, "$.block.nodes[17].expr", nullptr, "gelu"));
  json u = load("all_ops");
  node(u, "block", "recurrence")["update"][1] = "m = n + 1";
  EXPECT_TRUE(breaks(u, 15, "$.block.nodes[34].update[1]", nullptr, "\"m\""));
  json l = load("all_ops");
  node(l, "block", "recurrence")["let"] = {"inp = (1 - decay) * u * g", "decay = sigmoid(w)"};
  EXPECT_TRUE(breaks(l, 15, "$.block.nodes[34].let[0]", nullptr, "decay"));
  json p = load("all_ops");
  node(p, "block", "recurrence")["update"][0] = "h = decay * * h";
  EXPECT_TRUE(breaks(p, 15, "$.block.nodes[34].update[0]", nullptr, "character 13"));
  json i = load("all_ops");
  node(i, "block", "recurrence")["init"] = {"h = w0 * u"};  // no token yet
  EXPECT_TRUE(breaks(i, 15, "$.block.nodes[34].init[0]"));
  json c = load("all_ops");
  node(c, "block", "recurrence")["inputs"] = {"u"};
  EXPECT_TRUE(breaks(c, 15, "$.block.nodes[34].inputs"));
  json r = load("all_ops");
  node(r, "block", "recurrence")["readout"] = "h / max(n, 1) + k";
  EXPECT_TRUE(breaks(r, 15, "$.block.nodes[34].readout"));
}

TEST(IrValidate, R16RangesAndEnums) {
  json o = load("all_ops");
  node(o, "block", "depth_route")["step"] = {{"per_layer", {1, 3}}};
  EXPECT_TRUE(breaks(o, 16, "$.block.nodes[46].step.per_layer[1]"));
  json d = load("llama");
  node(d, "block", "attention")["softmax"] = "sparsemax";
  EXPECT_TRUE(breaks(d, 16, "$.block.nodes[5].softmax"));
  json e = load("llama");
  node(e, "head", "rmsnorm")["eps"] = -1e-5;
  EXPECT_TRUE(breaks(e, 16, "$.head.nodes[0].eps"));
  json p = load("llama");
  node(p, "block", "rmsnorm")["eps"] = {{"per_layer", {1e-5, -1e-5}}};
  EXPECT_TRUE(breaks(p, 16, "$.block.nodes[0].eps.per_layer[1]"));
}

TEST(IrValidate, R17Outputs) {
  json d = load("llama");
  d["outputs"] = {"logits", "hidden"};
  EXPECT_TRUE(breaks(d, 17, "$.outputs[1]"));
  json e = load("llama");
  e.erase("outputs");
  node(e, "head", "linear")["out"] = "scores";
  EXPECT_TRUE(breaks(e, 17, "$.head"));
}

// ---- R18: a real checkpoint ---------------------------------------------

class IrValidateModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = testing::test_model("llama", "f32");
    if (dir.empty()) return;
    model_dir_ = new fs::path(dir);
    weights_ = new WeightStore(ModelFiles::open((dir / "hf").string())->weights());
    const json cfg = testing::read_json(dir / "hf" / "config.json");
    json d = load("llama");  // written for this config; checked here
    EXPECT_EQ(cfg["vocab_size"], d["model"]["vocab"]);
    EXPECT_EQ(cfg["hidden_size"], d["model"]["d"]);
    EXPECT_EQ(cfg["num_hidden_layers"], d["model"]["n_layers"]);
    EXPECT_EQ(cfg["num_attention_heads"], node(d, "block", "attention")["heads"]);
    EXPECT_EQ(cfg["num_key_value_heads"], node(d, "block", "attention")["kv_heads"]);
  }
  static void TearDownTestSuite() {
    delete weights_;
    delete model_dir_;
    weights_ = nullptr;
    model_dir_ = nullptr;
  }
  void SetUp() override {
    if (!weights_) GTEST_SKIP() << "could not write the llama test model (scripts/write_test_model.py)";
  }
  static WeightStore* weights_;
  static fs::path* model_dir_;
};
WeightStore* IrValidateModel::weights_ = nullptr;
fs::path* IrValidateModel::model_dir_ = nullptr;

TEST_F(IrValidateModel, ValidDocumentFitsTheCheckpoint) {
  const auto ps = ir::validate_ir(load("llama"), weights_);
  EXPECT_TRUE(ps.empty()) << dump(ps);
  // The GGUF conversion binds under the same names.
  const auto gguf = ModelFiles::open((*model_dir_ / "model-f32.gguf").string())->weights();
  const auto pg = ir::validate_ir(load("llama"), &gguf);
  EXPECT_TRUE(pg.empty()) << dump(pg);
}

TEST_F(IrValidateModel, R18MissingWeights) {
  json d = load("llama");
  node(d, "block", "linear")["weight"] = "model.layers.{i}.self_attn.query.weight";
  EXPECT_TRUE(breaks(d, 18, "$.block.nodes[1].weight", weights_, "model.layers.0.self_attn.query.weight"));
  EXPECT_TRUE(ir::validate_ir(d).empty()) << "without a checkpoint, R18 is not checked";
  json t = load("llama");
  node(t, "head", "linear")["tied_to"] = "model.embed.weight";
  EXPECT_TRUE(breaks(t, 18, "$.head.nodes[1].tied_to", weights_, "model.embed.weight"));
  // A shared block: weight_index [0, 0] reads layer 0's tensors twice, fine; [0, 2] names layer 2's, missing.
  json w = load("llama");
  w["block"]["weight_index"] = {{"per_layer", {0, 0}}};
  EXPECT_TRUE(ir::validate_ir(w, weights_).empty()) << dump(ir::validate_ir(w, weights_));
  w["block"]["weight_index"] = {{"per_layer", {0, 1}}};
  w["block"]["nodes"][0]["weight"] = "model.layers.{i}.input_layernorm.weight";
  EXPECT_TRUE(ir::validate_ir(w, weights_).empty());
}

TEST_F(IrValidateModel, R18Shapes) {
  json o = load("llama");
  node(o, "block", "linear", 3)["weight"] = "model.layers.{i}.mlp.down_proj.weight";  // o_proj: [64, 128]
  EXPECT_TRUE(breaks(o, 18, "$.block.nodes[6].weight", weights_, "model.layers.0.mlp.down_proj.weight"));
  json n = load("llama");
  node(n, "block", "rmsnorm")["weight"] = "model.layers.{i}.self_attn.k_proj.weight";  // [32, 64]
  EXPECT_TRUE(breaks(n, 18, "$.block.nodes[0].weight", weights_, "k_proj"));
  json b = load("llama");
  node(b, "block", "linear")["bias"] = "model.norm.weight";  // 64 values for 64 outputs: fits
  EXPECT_TRUE(ir::validate_ir(b, weights_).empty()) << dump(ir::validate_ir(b, weights_));
  node(b, "block", "linear", 1)["bias"] = "model.norm.weight";  // k has 32 outputs
  EXPECT_TRUE(breaks(b, 18, "$.block.nodes[2].bias", weights_, "model.norm.weight"));
  json e = load("llama");
  node(e, "head", "linear")["tied_to"] = "model.layers.0.mlp.gate_proj.weight";  // [128, 64]: 128 logits
  EXPECT_TRUE(breaks(e, 10, "$.head.nodes[1].out", weights_, "model.vocab"));
}

TEST_F(IrValidateModel, R10WidthsFromTheCheckpoint) {
  // 2 query heads of 16 = 32, but q_proj gives 64.
  json d = load("llama");
  for (auto* n : {&node(d, "block", "rope"), &node(d, "block", "attention"), &d["block"]["state"][0]})
    (*n)["heads"] = 2;
  EXPECT_TRUE(ir::validate_ir(d).empty()) << dump(ir::validate_ir(d));  // nothing fixes q's width without weights
  EXPECT_TRUE(breaks(d, 10, "$.block.nodes[4].in[0]", weights_, "q_proj"));
  // A fused qkv split whose sizes do not add up to the projection's rows.
  json s = load("llama");
  auto& nodes = s["block"]["nodes"];
  nodes[2] = {{"op", "split"}, {"in", {"k"}}, {"out", {"k", "v"}}, {"sizes", {16, 16}}};
  nodes.erase(nodes.begin() + 3);  // v now comes from splitting k_proj's 32 rows... into 16 + 16
  EXPECT_TRUE(breaks(s, 10, "$.block.nodes[2].sizes", weights_, "split sizes sum to 32"));
}

// ---- the command line -----------------------------------------------------
// (Not in the AddressSanitizer build, which has no bonfire binary.)
#ifdef BONFIRE_BINARY

std::pair<std::string, int> run(const std::string& cmd) { return testing::run_command(cmd); }

class IrValidateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bonfire_ir_validate_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::string validate(const std::string& args) { return std::string(BONFIRE_BINARY) + " ir validate " + args + " 2>/dev/null"; }
  fs::path dir_;
};

size_t lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

TEST_F(IrValidateCli, ValidDocumentExits0Silently) {
  auto [out, status] = run(validate((testing::source_dir() / "tests" / "ir" / "docs" / "all_ops.json").string()));
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "");
}

TEST_F(IrValidateCli, BrokenDocumentPrintsOneLinePerProblem) {
  json d = load("llama");
  d["ir_version"] = 2;
  d["block"]["repeat"] = 3;
  node(d, "block", "attention")["state"] = "cache";
  const auto problems = ir::validate_ir(d);
  ASSERT_GE(problems.size(), 3u);
  auto [out, status] = run(validate(write("broken.json", d.dump(2))));
  EXPECT_EQ(status, 1);
  EXPECT_EQ(lines(out), problems.size()) << out;
  EXPECT_NE(out.find("$.ir_version: ir_version is 2, expected 1 (rule R1)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("(rule R8)"), std::string::npos) << out;

  json s = load("llama");
  node(s, "block", "attention")["heads"] = 0;
  auto [out2, status2] = run(validate(write("schema.json", s.dump())));
  EXPECT_EQ(status2, 1);
  EXPECT_EQ(out2.rfind("$.block.nodes[5].heads: schema: ", 0), 0u) << out2;
  EXPECT_EQ(lines(out2), 1u) << out2;
}

TEST_F(IrValidateCli, NotJsonOrUnreadable) {
  auto [out, status] = run(validate(write("bad.json", "{\"ir_version\": 1,\n  \"model\": }")));
  EXPECT_EQ(status, 1);
  EXPECT_NE(out.find("bad.json"), std::string::npos) << out;
  EXPECT_NE(out.find("line 2, column"), std::string::npos) << out;
  auto [out2, status2] = run(validate((dir_ / "missing.json").string()));
  EXPECT_EQ(status2, 1);
  EXPECT_NE(out2.find("missing.json"), std::string::npos) << out2;
}

TEST_F(IrValidateCli, ModelOptionChecksWeights) {
  const fs::path model = testing::test_model("llama", "f32");
  if (model.empty()) GTEST_SKIP() << "could not write the llama test model";
  const std::string docs = (testing::source_dir() / "tests" / "ir" / "docs").string();
  auto [out, status] = run(validate(docs + "/llama.json --model " + (model / "hf").string()));
  EXPECT_EQ(status, 0) << out;
  auto [out2, status2] = run(validate(docs + "/mla.json --model " + (model / "hf").string()));
  EXPECT_EQ(status2, 1);
  EXPECT_NE(out2.find("is not in the checkpoint (rule R18)"), std::string::npos) << out2;
  auto [out3, status3] = run(validate(docs + "/llama.json --model " + (dir_ / "nowhere").string()));
  EXPECT_EQ(status3, 1);
  EXPECT_NE(out3.find("nowhere"), std::string::npos) << out3;
}

#endif  // BONFIRE_BINARY

}  // namespace
}  // namespace bonfire
