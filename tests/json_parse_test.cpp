// core/json_parse: the bounded parser every outside document goes through.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/json_parse.h"

namespace bonfire {
namespace {

std::string nested(int n) { return std::string(n, '[') + std::string(n, ']'); }

std::string refusal(const std::string& text, const JsonLimits& limits = {}) {
  try {
    parse_json(text, "the body", limits);
  } catch (const Error& e) {
    return std::string(error_code_name(e.code)) + ": " + e.what();
  }
  return "accepted";
}

TEST(JsonParse, DepthLimitRefusesBeforeBuilding) {
  EXPECT_NO_THROW(parse_json(nested(64), "x"));
  EXPECT_EQ(refusal(nested(65)), "bad_graph: the body: JSON nested deeper than 64 levels");
  // Deep enough to overflow the stack in dump() or a destructor, were it built.
  EXPECT_EQ(refusal(nested(1000000)), "bad_graph: the body: JSON nested deeper than 64 levels");
  EXPECT_EQ(refusal("{\"a\": " + nested(100) + "}"), "bad_graph: the body: JSON nested deeper than 64 levels");
  EXPECT_EQ(refusal(nested(5), JsonLimits{4, 1 << 20}), "bad_graph: the body: JSON nested deeper than 4 levels");
}

TEST(JsonParse, SizeLimit) {
  EXPECT_EQ(refusal("[1, 2, 3]", JsonLimits{64, 4}), "too_large: the body: 9 bytes of JSON, over the limit of 4");
}

TEST(JsonParse, ErrorsNeverEchoTheInput) {
  const std::string bad = "{\"prompt\": \"caf\xff\xfe secret\"}";
  const std::string m = refusal(bad);
  EXPECT_EQ(m.rfind("bad_graph: the body: malformed JSON: ", 0), 0u) << m;
  EXPECT_EQ(m.find("secret"), std::string::npos) << m;
  EXPECT_EQ(m.find('\xff'), std::string::npos) << m;
  EXPECT_NE(m.find("after the key \"prompt\""), std::string::npos) << m;
  // The message is always printable ASCII, so it can be dumped as JSON.
  for (char c : m) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << m;
}

TEST(JsonParse, NumberOverflowNamesTheKey) {
  const std::string m = refusal("{\"maxTokens\": 1e400}");
  EXPECT_NE(m.find("malformed JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("\"maxTokens\""), std::string::npos) << m;
}

TEST(JsonParse, BoundedTextCutsAtACharacter) {
  EXPECT_EQ(bounded_text("abc", 3), "abc");
  EXPECT_EQ(bounded_text("abcdef", 3), "abc...");
  EXPECT_EQ(bounded_text("ab\xc3\xa9z", 3), "ab...");  // never half of the two-byte \u00e9
}

TEST(JsonParse, DumpReplacesInvalidUtf8) {
  nlohmann::json j = std::string("a\xff" "b");
  EXPECT_EQ(dump_json(j), "\"a\xef\xbf\xbd" "b\"");
}

}  // namespace
}  // namespace bonfire
