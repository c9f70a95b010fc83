#include <gtest/gtest.h>

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

}  // namespace
}  // namespace bonfire
