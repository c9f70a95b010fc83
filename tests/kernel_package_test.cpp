// Kernel packages: the expression language's package features (dotted
// names offered whole, and-terms, paths), loading and validating packages,
// every expression of spec/kernels/qmoe.json evaluated, derive cycles, the
// device files, and the runtime (intermediates, repeat blocks, dispatch
// sizes, the pass registry) with a test package and test passes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "core/error.h"
#include "core/file.h"
#include "core/threads.h"
#include "kernels/case_dir.h"
#include "kernels/qmoe_problem.h"
#include "kernels/runtime.h"
#include "kernels/scope.h"
#include "kernels/select.h"

namespace bonfire::kernels {
namespace {

using json = nlohmann::json;
using testing::kOlmoe;
using testing::kQwenMoe;
using testing::qmoe_package;
using testing::qmoe_problem;
using testing::source_path;
using testing::test_device;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- the expression language ------------------------------------------

TEST(KernelExpr, DottedNamesAreOfferedWholeFirst) {
  std::vector<std::string> asked;
  const Expr::Lookup lookup = [&](const std::string& n) -> std::optional<json> {
    asked.push_back(n);
    if (n == "constants.a") return 2;
    if (n == "device") return json{{"limits", {{"x", 3}}}, {"features", {"subgroups"}}};
    return std::nullopt;
  };
  EXPECT_EQ(Expr::parse("constants.a + device.limits.x").eval(lookup), 5.0);
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "constants"), 0);  // never built whole
  EXPECT_EQ(Expr::parse("device.features.has(\"subgroups\")").eval(lookup), true);
  const std::string m = error_of([&] { Expr::parse("1 + device.limits.nope").eval(lookup); });
  EXPECT_EQ(m, "expression \"1 + device.limits.nope\": unknown name 'device.limits.nope' at character 5");
}

TEST(KernelExpr, AndTermsAndPaths) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Expr::parse("a and (b or c) and d").and_terms(), (V{"a", "(b or c)", "d"}));
  EXPECT_EQ(Expr::parse("(a and b) && c").and_terms(), (V{"a", "b", "c"}));
  EXPECT_EQ(Expr::parse("x if a and b else y").and_terms(), (V{"x if a and b else y"}));
  EXPECT_EQ(Expr::parse("  (1 + 2) * f(x)  and  not y ").and_terms(), (V{"(1 + 2) * f(x)", "not y"}));
  const auto p = Expr::parse("device.features.has(\"x\") and min(attrs.k, shapes.input[0]) > n").paths();
  EXPECT_EQ(p, (std::map<std::string, size_t>{{"device.features", 0}, {"attrs.k", 33}, {"shapes.input", 42}, {"n", 61}}));
}

// ---- loading ------------------------------------------------------------

TEST(KernelPackage, LoadsQmoe) {
  const Package& p = qmoe_package();
  EXPECT_EQ(p.name, "QMoE");
  ASSERT_EQ(p.variants.size(), 5u);
  EXPECT_EQ(p.variants[1].id, "quant_grouped_sgmat_routed");
  EXPECT_EQ(p.variants[1].needs.features, (std::vector<std::string>{"subgroups", "chromium-experimental-subgroup-matrix"}));
  EXPECT_EQ(p.inputs.size(), 6u);
  EXPECT_TRUE(p.attribute_names.count("block_size"));
  EXPECT_TRUE(p.attribute_names.count("swiglu_limit"));
  EXPECT_EQ(p.repeat_indexes, std::set<std::string>{"chunk"});
  EXPECT_EQ(contract_conditions(p), std::vector<std::string>{"quantContract"});
}

// Every expression of the package, evaluated with core/expr for decode and
// prefill shapes on every device: outputs' shapes, derive, constants,
// binding values, and per variant its constants, when, intermediates'
// shapes, repeat counts and dispatch sizes (repeat indexes at 0).
TEST(KernelPackage, EveryQmoeExpressionEvaluates) {
  const Package& p = qmoe_package();
  const auto sites = p.expressions();
  EXPECT_GT(sites.size(), 150u);
  int evaluated = 0;
  for (const char* dev : {"cpu", "gpu_sgmat", "gpu_subgroups", "small"}) {
    const Device d = test_device(dev);
    for (const auto& size : {kQwenMoe, kOlmoe})
      for (int64_t tokens : {1, 512}) {
        const Bound b = check_problem(p, qmoe_problem(size, tokens), d);
        Scope scope(p, b, d);
        for (const auto& site : sites) {
          scope.set_variant(site.variant >= 0 ? &p.variants[site.variant] : nullptr);
          std::map<std::string, int64_t> repeat;
          for (const auto& r : site.repeat) repeat[r] = 0;
          scope.set_repeat(repeat);
          json v;
          ASSERT_NO_THROW(v = scope.eval(*site.expr)) << dev << " " << site.path << ": " << site.expr->source();
          if (site.path.find(".when[") != std::string::npos) {
            EXPECT_TRUE(v.is_boolean()) << site.path;
          }
          if (site.path.find(".dispatch.") != std::string::npos) {
            EXPECT_TRUE(v.is_number()) << site.path;
          }
          if (site.path.find("intermediates[") != std::string::npos) {
            EXPECT_TRUE(v.is_array()) << site.path;
          }
          ++evaluated;
        }
      }
  }
  EXPECT_EQ(evaluated, (int)sites.size() * 16);
}

TEST(KernelPackage, CpuDeviceFileIsTheBuiltInOne) {
  EXPECT_EQ(json::parse(read_file(source_path("devices/cpu.json"))), json::parse(cpu_device_text()));
  const Device& d = cpu_device();
  EXPECT_FALSE(d.has_feature("subgroups"));
  EXPECT_EQ(d.limit("maxStorageBufferBindingSize"), 1073741824.0);
  const json reasons = json::parse(cpu_device_text())["reasons"];
  for (const auto& [k, v] : d.view["limits"].items()) EXPECT_TRUE(reasons.contains(k)) << k << " has no reason";
}

TEST(KernelPackage, DeviceFilesAreChecked) {
  const json good = json::parse(read_file(source_path("tests/kernels/devices/small.json")));
  json j = good;
  j["limits"]["maxBufferSize"] = "big";
  EXPECT_EQ(error_of([&] { parse_device(j, "d.json"); }), "d.json: limits.maxBufferSize: must be a number >= 0, got \"big\"");
  j = good;
  j["features"] = {"subgroups", "subgroups"};
  EXPECT_EQ(error_of([&] { parse_device(j, "d.json"); }), "d.json: features[1]: \"subgroups\" is listed twice");
  j = good;
  j["limitz"] = json::object();
  EXPECT_NE(error_of([&] { parse_device(j, "d.json"); }).find("d.json: limitz: unknown key"), std::string::npos);
  EXPECT_NE(error_of([] { load_device("/nonexistent/device.json"); }).find("cannot be read"), std::string::npos);
}

json qmoe_json() { return json::parse(read_file(source_path("spec/kernels/qmoe.json"))); }

std::string load_error(const json& j) {
  return error_of([&] { parse_package(j, "qmoe.json"); });
}

TEST(KernelPackage, MalformedPackagesNameTheJsonPath) {
  auto expect = [](const json& j, const std::string& part) {
    const std::string m = load_error(j);
    EXPECT_NE(m.find(part), std::string::npos) << m;
    EXPECT_EQ(m.rfind("qmoe.json: ", 0), 0u) << m;
  };
  json j = qmoe_json();
  j.erase("variants");
  expect(j, "qmoe.json: variants: missing");
  j = qmoe_json();
  j["variants"][1]["passes"][1]["repeat"]["count"] = "hiddenChunkCount +";
  expect(j, "variants[1].passes[1].repeat.count: expression \"hiddenChunkCount +\": unexpected end at character 19");
  j = qmoe_json();
  j["derive"]["numTokens"] = "numel(shapes.input) / max(1, hiddenSiz)";
  expect(j, "derive.numTokens: expression \"numel(shapes.input) / max(1, hiddenSiz)\": unknown name 'hiddenSiz' at character 30");
  j = qmoe_json();
  j["derive"]["topK"] = "attrs.kk";
  expect(j, "derive.topK: expression \"attrs.kk\": unknown attribute 'attrs.kk' at character 1");
  j = qmoe_json();
  j["derive"]["interSize"] = "dim(shapes.fc3_experts_weights, 1)";
  expect(j, "unknown role 'shapes.fc3_experts_weights'");
  j = qmoe_json();
  j["variants"][4]["passes"][0]["dispatch"]["threads"] = "repeat.chunk";
  expect(j, "variants[4].passes[0].dispatch.threads: expression \"repeat.chunk\": 'repeat.chunk' outside a repeat block");
  j = qmoe_json();
  j["variants"][3]["constants"]["decodeRows"] = "constants.nope";
  expect(j, "variants[3].constants.decodeRows: expression \"constants.nope\": unknown constant 'constants.nope'");
  j = qmoe_json();
  j["variants"][0]["requires"] = {{"gpus", 1}};
  expect(j, "variants[0].requires.gpus: unknown requirement");
  j = qmoe_json();
  j["variants"][1]["id"] = "quant_zero_inter";
  expect(j, "variants[1].id: \"quant_zero_inter\" is used twice");
  j = qmoe_json();
  j["variants"][1]["intermediates"][0]["dtype"] = "float8";
  expect(j, "variants[1].intermediates[0].dtype: \"float8\" is not a dtype");
  j = qmoe_json();
  j["variants"][4]["passes"][0].erase("dispatch");
  expect(j, "variants[4].passes[0].dispatch: missing");
  j = qmoe_json();
  j["variants"][0]["priority"] = "high";
  expect(j, "variants[0].priority: must be a number");
  j = qmoe_json();
  j["inputs"][0]["dtype"] = "T9";
  expect(j, "inputs[0].dtype: \"T9\" is neither a typeConstraints name nor a dtype");
  j = qmoe_json();
  j["attributeConstraints"]["k"] = {{"values", {2}}};
  expect(j, "attributeConstraints.k: the default 1 is not one of the allowed values");
  j = qmoe_json();
  j["derive"]["attrs"] = "1";
  expect(j, "derive.attrs: \"attrs\" is a reserved name");
  j = qmoe_json();
  j["variants"][2]["when"][0] = 7;  // a number is accepted as an expression
  EXPECT_EQ(load_error(j), "(no error)");
  j["variants"][2]["when"][0] = json::object();
  expect(j, "variants[2].when[0]: must be an expression (a string), got {}");
  j = qmoe_json();
  j["variants"][2]["passes"][1]["passes"][0]["bindings"] = "nope";
  expect(j, "variants[2].passes[1].passes[0].bindings: no bindingSet \"nope\"");

  const auto dir = std::filesystem::temp_directory_path() / "bonfire_kernel_pkg_test";
  std::filesystem::create_directories(dir);
  std::ofstream((dir / "bad.json").string()) << "{\"name\": ";
  EXPECT_NE(error_of([&] { load_package((dir / "bad.json").string()); }).find("bad.json: malformed JSON"), std::string::npos);
}

// ---- the test package ---------------------------------------------------

json test_json() { return json::parse(read_file(source_path("tests/kernels/test_package.json"))); }

Bound test_bound(const Package& p, const Device& d, std::vector<int64_t> shape = {7, 5}) {
  Problem pr;
  pr.shapes["x"] = std::move(shape);
  return check_problem(p, pr, d);
}

TEST(KernelPackage, DeriveCyclesAreNamed) {
  json j = test_json();
  j["derive"]["a"] = "b + 1";
  j["derive"]["b"] = "a * 2";
  j["derive"]["s"] = "s + 1";
  j["derive"]["c"] = "constants.k";
  j["constants"]["k"] = "c";
  j["variants"][1]["when"].push_back("a > 0");
  const Package p = parse_package(j, "cyclic.json");  // cycles are found when evaluated, lazily
  const Device& d = cpu_device();
  const Bound b = test_bound(p, d);
  Scope scope(p, b, d);
  EXPECT_EQ(error_of([&] { scope.value("a"); }), "derive cycle: a -> b -> a");
  EXPECT_EQ(error_of([&] { scope.value("b"); }), "derive cycle: b -> a -> b");
  EXPECT_EQ(error_of([&] { scope.value("s"); }), "derive cycle: s -> s");
  EXPECT_EQ(error_of([&] { scope.value("c"); }), "derive cycle: c -> constants.k -> c");
  EXPECT_EQ(scope.value("rows"), 7);  // the rest still evaluates
  // In a when entry: that variant fails with the error, the others are unaffected.
  const Selection s = select_variant(p, b, d);
  EXPECT_EQ(s.variants[1].failed["condition"], "a > 0");
  EXPECT_EQ(s.variants[1].failed["error"], "derive cycle: a -> b -> a");
  EXPECT_EQ(s.variants[s.chosen].id, "chunked");
  // In the contract (a condition every variant needs): the call is refused.
  for (auto& v : j["variants"]) v["when"].push_back("a");
  const Package q = parse_package(j, "cyclic.json");
  EXPECT_EQ(error_of([&] { test_bound(q, d); }),
            "TestOp: refused by TestOp's contract: a cannot be evaluated: derive cycle: a -> b -> a");
}

TEST(KernelPackage, ErrorsNameTheDeriveAndExpression) {
  json j = test_json();
  j["derive"]["bad"] = "rows / (cols - 5)";
  const Package p = parse_package(j, "t.json");
  const Bound b = test_bound(p, cpu_device());
  Scope scope(p, b, cpu_device());
  EXPECT_EQ(error_of([&] { scope.value("bad"); }),
            "derive.bad: expression \"rows / (cols - 5)\": division by zero at character 6");
  EXPECT_EQ(error_of([&] { scope.eval(Expr::parse("repeat.chunk")); }),
            "expression \"repeat.chunk\": unknown name 'repeat.chunk' at character 1");
}

TEST(KernelPackage, TestPackageContractAndAttributes) {
  const Package p = load_package(source_path("tests/kernels/test_package.json"));
  Problem pr;
  pr.shapes["x"] = {7, 5};
  pr.attrs["limit"] = 0;
  EXPECT_EQ(error_of([&] { check_problem(p, pr, cpu_device()); }),
            "limit = 0: refused by TestOp's contract: shapeOk -> limitOk: "
            "\"not has(attrs, \"limit\") or attrs.limit >= 1\" is false");
  pr.attrs["limit"] = 2;
  const Bound b = check_problem(p, pr, cpu_device());
  EXPECT_EQ(b.attrs, json({{"mode", "copy"}, {"scale", 1}, {"limit", 2}}));
  EXPECT_EQ(b.shapes.at("y"), (std::vector<int64_t>{7, 5}));
  EXPECT_EQ(b.dtypes.at("y"), "float32");
  pr.attrs = {{"mode", "triple"}};
  EXPECT_EQ(error_of([&] { check_problem(p, pr, cpu_device()); }),
            "mode: \"triple\" is not allowed (allowed: \"copy\", \"double\")");
}

struct Call {
  std::string pass;
  int64_t repeat;
  std::array<int64_t, 3> dispatch;
  std::string variant;
};
std::vector<Call>& calls() {
  static std::vector<Call> c;
  return c;
}

void copy_rows(PassArgs& a, int64_t r0, int64_t n) {
  const auto cols = (int64_t)a.num("constants.cols");
  const float factor = (float)a.num("factor");
  const float* x = a.buffers.at("x").as<float>();
  float* y = a.buffers.at("y").as<float>();
  parallel_for(n * cols, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[r0 * cols + i] = factor * x[r0 * cols + i];
  });
}

void test_start(PassArgs& a) {
  calls().push_back({"start", a.repeat_index, a.dispatch, a.variant});
  const auto cols = (int64_t)a.num("cols");
  EXPECT_EQ(a.buffers.at("scratch").shape, (std::vector<int64_t>{3, cols}));  // [chunkRows, cols]
  EXPECT_EQ(a.buffers.at("scratch").bytes.size(), (size_t)(3 * cols * 4));
  EXPECT_EQ(a.buffers.at("counter").dtype, "uint32");
  EXPECT_EQ(a.num("constants.rowsPerChunk"), 3);
}

void test_copy_chunk(PassArgs& a) {
  calls().push_back({"copy", a.repeat_index, a.dispatch, a.variant});
  EXPECT_EQ(a.num("repeat.chunk"), a.repeat_index);
  a.buffers.at("counter").as<uint32_t>()[0] += 1;
  copy_rows(a, a.repeat_index * (int64_t)a.num("chunkRows"), a.dispatch[1]);
}

void test_copy_all(PassArgs& a) {
  calls().push_back({"all", a.repeat_index, a.dispatch, a.variant});
  copy_rows(a, 0, (int64_t)a.num("rows"));
}

void register_test_passes() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_pass("Test.Start", test_start);
    register_pass("Test.CopyChunk", test_copy_chunk);
    register_pass("Test.CopyAll", test_copy_all);
  });
}

std::map<std::string, Buffer> x_buffer(int64_t rows, int64_t cols) {
  Buffer x{"float32", {rows, cols}, std::vector<uint8_t>((size_t)(rows * cols * 4))};
  for (int64_t i = 0; i < rows * cols; ++i) x.as<float>()[i] = (float)i - 3.5f;
  return {{"x", x}};
}

TEST(KernelPackage, RunsRepeatBlocksWithDispatchSizes) {
  register_test_passes();
  const Package p = load_package(source_path("tests/kernels/test_package.json"));
  calls().clear();
  auto buffers = x_buffer(7, 5);
  // cpu: maxComputeInvocationsPerWorkgroup 1024 >= 256 → "chunked" (priority 2).
  // chunks = ceilDiv(7, 3) = 3; copy dispatch x = cols = 5, y = min(3, 7 - chunk·3) = 3, 3, 1.
  RunReport r = run_op(p, {{"mode", "double"}}, buffers, cpu_device());
  EXPECT_EQ(r.variant, "chunked");
  EXPECT_EQ(r.pass_calls, 4);
  ASSERT_EQ(calls().size(), 4u);
  EXPECT_EQ(calls()[0].pass, "start");
  EXPECT_EQ(calls()[0].repeat, -1);
  EXPECT_EQ(calls()[0].dispatch, (std::array<int64_t, 3>{35, 1, 1}));
  EXPECT_EQ(calls()[0].variant, "chunked");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(calls()[1 + i].pass, "copy");
    EXPECT_EQ(calls()[1 + i].repeat, i);
  }
  EXPECT_EQ(calls()[1].dispatch, (std::array<int64_t, 3>{5, 3, 1}));
  EXPECT_EQ(calls()[2].dispatch, (std::array<int64_t, 3>{5, 3, 1}));
  EXPECT_EQ(calls()[3].dispatch, (std::array<int64_t, 3>{5, 1, 1}));
  ASSERT_EQ(buffers.size(), 2u);  // x and y; the intermediates are freed
  const Buffer& y = buffers.at("y");
  EXPECT_EQ(y.shape, (std::vector<int64_t>{7, 5}));
  for (int64_t i = 0; i < 35; ++i) EXPECT_EQ(y.as<float>()[i], 2 * ((float)i - 3.5f)) << i;

  // small: 128 < 256 → "simple", one call with threads = 35.
  calls().clear();
  buffers = x_buffer(7, 5);
  r = run_op(p, json::object(), buffers, test_device("small"));
  EXPECT_EQ(r.variant, "simple");
  ASSERT_EQ(calls().size(), 1u);
  EXPECT_EQ(calls()[0].dispatch, (std::array<int64_t, 3>{35, 1, 1}));
  EXPECT_EQ(buffers.at("y").as<float>()[34], 34 - 3.5f);

  // A repeat count of 0 (no rows): the repeat block runs no passes.
  calls().clear();
  buffers = x_buffer(0, 5);
  r = run_op(p, json::object(), buffers, cpu_device());
  EXPECT_EQ(r.pass_calls, 1);
}

TEST(KernelPackage, MissingPassIsNamedBeforeAnythingRuns) {
  register_test_passes();
  const Package p = load_package(source_path("tests/kernels/test_package.json"));
  auto buffers = x_buffer(7, 5);
  const Bound b = test_bound(p, cpu_device());
  calls().clear();
  try {
    run_variant(p, b, cpu_device(), 2, buffers);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::UnsupportedFeature);
    EXPECT_EQ(std::string(e.what()),
              "variant unimplemented: pass \"Test.NotRegistered\" (variants[2].passes[0]) has no implementation");
  }
  EXPECT_TRUE(calls().empty());
  // Buffers that do not match the checked call are refused.
  buffers.at("x").bytes.pop_back();
  EXPECT_NE(error_of([&] { run_variant(p, b, cpu_device(), 1, buffers); }).find("x: 139 bytes"), std::string::npos);
}

TEST(KernelPackage, DispatchMustBeWhole) {
  register_test_passes();
  json j = test_json();
  j["variants"][1]["passes"][0]["dispatch"]["threads"] = "rows / 2";
  const Package p = parse_package(j, "t.json");
  auto buffers = x_buffer(7, 5);
  EXPECT_EQ(error_of([&] { run_variant(p, test_bound(p, cpu_device()), cpu_device(), 1, buffers); }),
            "variants[1].passes[0].dispatch.threads \"rows / 2\" is 3.5, not a whole number >= 0");
}

TEST(KernelPackage, CaseDirectoryRoundTrip) {
  register_test_passes();
  const Package p = load_package(source_path("tests/kernels/test_package.json"));
  const auto dir = std::filesystem::temp_directory_path() / "bonfire_kernel_case_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto x = x_buffer(2, 3).at("x");
  std::ofstream((dir / "x.bin").string(), std::ios::binary)
      .write(reinterpret_cast<const char*>(x.bytes.data()), (std::streamsize)x.bytes.size());
  json c = {{"op", "TestOp"},
            {"attributes", {{"mode", "double"}}},
            {"inputs", {{"x", {{"file", "x.bin"}, {"dtype", "float32"}, {"shape", {2, 3}}}}}},
            {"expected", {{"y", {{"data", {-7, -5, -3, -1, 1, 3}}, {"dtype", "float32"}, {"shape", {2, 3}}}}}}};
  std::ofstream((dir / "case.json").string()) << c.dump();
  CaseDir cd = load_case(dir.string());
  EXPECT_EQ(cd.op, "TestOp");
  auto buffers = cd.inputs;
  run_op(p, cd.attrs, buffers, cpu_device());
  const std::string out = (dir / "y.bin").string();
  write_buffer_file(out, buffers.at("y"));
  EXPECT_EQ(read_file(out).size(), 24u);
  const Comparison cmp = compare(buffers.at("y"), cd.expected_outputs.at("y"), "y");
  EXPECT_EQ(cmp.max_abs, 0.0);
  EXPECT_EQ(cmp.numel, 6);
  // A file of the wrong size names the role and both sizes.
  c["inputs"]["x"]["shape"] = {3, 3};
  std::ofstream((dir / "case.json").string()) << c.dump();
  const std::string m = error_of([&] { load_case(dir.string()); });
  EXPECT_NE(m.find("x: "), std::string::npos) << m;
  EXPECT_NE(m.find("has 24 bytes, float32 [3,3] needs 36"), std::string::npos) << m;
  // A directory where the file belongs is named as one (it used to read as
  // a file of 2^63 - 1 bytes).
  std::filesystem::create_directories(dir / "sub");
  c["inputs"]["x"]["file"] = "sub";
  std::ofstream((dir / "case.json").string()) << c.dump();
  const std::string d = error_of([&] { load_case(dir.string()); });
  EXPECT_NE(d.find("sub is a directory"), std::string::npos) << d;
  c["inputs"]["x"]["file"] = "x.bin";
  c["inputs"]["x"]["shape"] = {2, 3};
  c["expected"] = {{"error", "mode"}};
  std::ofstream((dir / "case.json").string()) << c.dump();
  EXPECT_EQ(load_case(dir.string()).expected_error, "mode");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bonfire::kernels
