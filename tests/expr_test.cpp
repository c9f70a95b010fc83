#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/expr.h"

namespace bonfire {
namespace {

using json = nlohmann::json;

json eval(const std::string& s, const json& env = json::object()) {
  return Expr::parse(s).eval([&](const std::string& n) -> std::optional<json> {
    if (env.contains(n)) return env[n];
    return std::nullopt;
  });
}

TEST(Expr, ArithmeticAndPrecedence) {
  EXPECT_EQ(eval("1 + 2 * 3"), 7.0);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9.0);
  EXPECT_EQ(eval("-2 * -3"), 6.0);
  EXPECT_EQ(eval("7 % 3"), 1.0);
  EXPECT_EQ(eval("-7 % 3"), 2.0);
  EXPECT_EQ(eval("max(0, pos - 4095)", {{"pos", 5000}}), 905.0);
  EXPECT_EQ(eval("max(0, pos - 4095)", {{"pos", 7}}), 0.0);
  EXPECT_EQ(eval("ceilDiv(10, 4) + pow2ceil(33) + floor(2.7)"), 3.0 + 64 + 2);
}

TEST(Expr, LogicConditionalsAndMembers) {
  const json env = {{"attrs", {{"k", 4}, {"act", "swiglu"}}}, {"shapes", {{"input", {2, 3, 8}}}},
                    {"device", {{"features", {"subgroups", "f16"}}}}};
  EXPECT_EQ(eval("1 if attrs.k > 2 else 0", env), 1.0);
  EXPECT_EQ(eval("attrs.act == \"swiglu\" and not (attrs.k < 1)", env), true);
  EXPECT_EQ(eval("dim(shapes.input, -1) * numel(shapes.input)", env), 8.0 * 48);
  EXPECT_EQ(eval("has(attrs, 'k') and not has(attrs, 'q')", env), true);
  EXPECT_EQ(eval("device.features.has(\"f16\")", env), true);
  EXPECT_EQ(eval("shapes.input[1]", env), 3.0);
  EXPECT_EQ(Expr::parse("a + b.c * f(d)").names(), (std::set<std::string>{"a", "b", "d"}));
}

TEST(Expr, ErrorsNamePosition) {
  try {
    eval("1 + * 2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::BadGraph);
    EXPECT_NE(std::string(e.what()).find("character 5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eval("nope + 1"), Error);
  EXPECT_THROW(eval("1 / 0"), Error);
  EXPECT_THROW(eval("(1 + 2"), Error);
  EXPECT_THROW(eval("frob(1)"), Error);
  EXPECT_THROW(eval("1 if 2"), Error);
  EXPECT_THROW(eval("'open"), Error);
}

// A string literal that is not UTF-8 used as a number is Error(BadGraph),
// not nlohmann's type_error from dump() (found by fuzz_graph;
// tests/fuzz/corpus/graph/crash-expr-invalid-utf8-string.txt).
TEST(Expr, InvalidUtf8StringIsABadGraphError) {
  const Expr::Lookup none = [](const std::string&) -> std::optional<json> { return std::nullopt; };
  const Expr e = Expr::parse("\"p\xff\xffmul\"");
  EXPECT_THROW(e.eval_number(none), Error);
  EXPECT_THROW(Expr::parse("\"\xfe\" + 1").compile_numeric({}), Error);
  EXPECT_THROW(Expr::parse("1 if \"\xfe\" else 2").eval_number(none), Error);
}

// Nesting is bounded (200 levels): the parser, evaluators and destructor
// recurse per level, and "[[[[..." or "-----x" a few thousand deep overflowed
// the stack (found by fuzz_graph;
// tests/fuzz/corpus/graph/crash-expr-deep-unary-stack-overflow.txt).
TEST(Expr, NestingDepthIsBounded) {
  const Expr::Lookup x1 = [](const std::string& n) -> std::optional<json> {
    if (n == "x") return json(1);
    return std::nullopt;
  };
  for (const std::string& deep : {std::string(5000, '-') + "x", std::string(5000, '(') + "x" + std::string(5000, ')'),
                                  std::string(5000, '['), std::string(3000, '!') + "x"}) {
    try {
      Expr::parse(deep);
      FAIL() << deep.substr(0, 8);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nested more than 200 deep"), std::string::npos) << e.what();
    }
  }
  std::string chain = "x";
  for (int i = 0; i < 3000; ++i) chain += " + x";
  EXPECT_THROW(Expr::parse(chain), Error);
  // Real expressions are far from it.
  EXPECT_EQ(Expr::parse(std::string(50, '(') + "x + 1" + std::string(50, ')')).eval_number(x1), 2.0);
  EXPECT_EQ(Expr::parse(std::string(150, '-') + "x").eval_number(x1), 1.0);
}

TEST(Expr, ElementwiseFunctions) {
  const double x = 0.7;
  EXPECT_DOUBLE_EQ(eval("rsqrt(4)").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(eval("tanh(0.7)").get<double>(), std::tanh(x));
  EXPECT_DOUBLE_EQ(eval("sigmoid(0.7)").get<double>(), 1 / (1 + std::exp(-x)));
  EXPECT_DOUBLE_EQ(eval("silu(0.7)").get<double>(), x / (1 + std::exp(-x)));
  EXPECT_DOUBLE_EQ(eval("softplus(0.7)").get<double>(), std::log1p(std::exp(x)));
  EXPECT_EQ(eval("softplus(25)"), 25.0);  // torch's threshold: x itself above 20
  EXPECT_EQ(eval("relu(-2) + relu(3)"), 3.0);
  EXPECT_EQ(eval("min(3, 1, 2) + max([4, 9, 2])"), 10.0);
  EXPECT_THROW(eval("tanh(1, 2)"), Error);
}

// The compiled numeric path agrees with the JSON evaluator.
TEST(Expr, NumericMatchesJsonEvaluation) {
  const std::vector<std::string> names = {"a", "b", "c"};
  const std::vector<std::string> sources = {
      "a + b * c - a / b",
      "exp(a) - log(abs(b) + 1) + sqrt(abs(c)) + rsqrt(abs(a) + 1)",
      "tanh(a) + sigmoid(b) + silu(c) + softplus(a * 10) + relu(b)",
      "min(a, b, c) + max(a, b) + pow(abs(a), 1.5) + abs(c)",
      "a if a > b else c", "b > 0 ? a : -a", "(a < b) + (a <= b) + (a == a) + (a != b) + (a >= c)",
      "a > 0 and b > 0 or not (c > 0)", "a % 0.75 + floor(b) + ceil(c) + round(a)",
      "ceilDiv(a, 0.3) + pow2ceil(abs(b) * 10)", "-a + +b - -c", "true + false * 2 + 1.5e-1",
  };
  const double points[][3] = {{0.3, -1.2, 2.5}, {-0.8, 0.4, -0.1}, {1.7, 1.7, 0.0}, {3.0, -2.0, 0.5}};
  for (const auto& src : sources) {
    const Expr e = Expr::parse(src);
    const NumericExpr ne = e.compile_numeric(names);
    std::vector<double> col[3], out(4);
    for (const auto& p : points) {
      const json env = {{"a", p[0]}, {"b", p[1]}, {"c", p[2]}};
      const json want = eval(src, env);
      const double w = want.is_boolean() ? (want.get<bool>() ? 1.0 : 0.0) : want.get<double>();
      EXPECT_DOUBLE_EQ(ne.eval(p), w) << src << " at " << env.dump();
      for (int v = 0; v < 3; ++v) col[v].push_back(p[v]);
    }
    const double* vars[3] = {col[0].data(), col[1].data(), col[2].data()};
    ne.eval_batch(vars, 4, out.data());
    for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(out[i], ne.eval(points[i])) << src << " point " << i;
  }
}

TEST(Expr, NumericBatchMayWriteIntoAVariable) {
  const NumericExpr ne = Expr::parse("h * 0.5 + x").compile_numeric({"h", "x"});
  std::vector<double> h = {2, 4, 6}, x = {1, 1, 1};
  const double* vars[2] = {h.data(), x.data()};
  ne.eval_batch(vars, 3, h.data());
  EXPECT_EQ(h, (std::vector<double>{2, 3, 4}));
}

TEST(Expr, NumericIsIeeeAndRefusesNonNumbers) {
  const NumericExpr div = Expr::parse("a / b").compile_numeric({"a", "b"});
  const double p[] = {1.0, 0.0};
  EXPECT_TRUE(std::isinf(div.eval(p)));
  const double nanp[] = {0.0, 0.0};
  EXPECT_TRUE(std::isnan(div.eval(nanp)));
  for (const char* bad : {"a + q", "len(a)", "a.b", "a[0]", "[a]", "'s'", "has(a, 'x')", "frob(a)", "a.f(1)", "null"}) {
    try {
      Expr::parse(bad).compile_numeric({"a"});
      ADD_FAILURE() << bad << " compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.code, ErrorCode::BadGraph) << bad;
      EXPECT_NE(std::string(e.what()).find("at character"), std::string::npos) << e.what();
    }
  }
  // a deep expression (more stack than the one-value fast path holds)
  std::string deep = "a";
  for (int i = 0; i < 40; ++i) deep = "(1 + " + deep + ")";
  const double one[] = {1.0};
  EXPECT_EQ(Expr::parse(deep).compile_numeric({"a"}).eval(one), 41.0);
  std::string wide = "a";
  for (int i = 0; i < 40; ++i) wide = "a * (" + wide + ")";
  EXPECT_EQ(Expr::parse(wide).compile_numeric({"a"}).eval(one), 1.0);
}

}  // namespace
}  // namespace bonfire
