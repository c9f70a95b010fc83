// core/json_parse: the bounded parser every outside document goes through.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/file.h"
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

std::string file_refusal(const std::string& path, const JsonLimits& limits = {}) {
  try {
    parse_json_file(path, limits);
  } catch (const Error& e) {
    return std::string(error_code_name(e.code)) + ": " + e.what();
  }
  return "accepted";
}

TEST(JsonParse, FilesAreReadUnderTheLimit) {
  // A directory opens like a file that reads empty; it is named instead.
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(file_refusal(dir), "bad_graph: " + dir + " is a directory");
  // A device or pipe has no size to check first: it is read as a stream, and
  // stopped at the limit.
  EXPECT_EQ(file_refusal("/dev/zero", JsonLimits{64, 1000}), "too_large: /dev/zero: over the limit of 1000 bytes");
  EXPECT_EQ(file_refusal("/dev/null").rfind("bad_graph: /dev/null: malformed JSON: ", 0), 0u);  // read, and empty
  std::istringstream in(std::string(1001, ' '));
  EXPECT_THROW(read_stream(in, "stdin", 1000), Error);
  std::istringstream fits(std::string(1000, ' '));
  EXPECT_EQ(read_stream(fits, "stdin", 1000).size(), 1000u);
}

}  // namespace
}  // namespace bonfire
