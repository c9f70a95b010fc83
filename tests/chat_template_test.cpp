// Chat templates against the reference renders in goldens/templates/ (written
// by scripts/gen_template_goldens.mjs from @huggingface/jinja, the engine of
// transformers.js' apply_chat_template): every render byte-identical, every
// failure a bonfire::Error with the reference's message.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "core/error.h"
#include "model/chat_template/chat_template.h"

namespace bonfire {
namespace {

using json = nlohmann::ordered_json;

std::filesystem::path golden_dir() { return std::filesystem::path(BONFIRE_SOURCE_DIR) / "goldens" / "templates"; }

json read_golden(const std::string& name) {
  std::ifstream f(golden_dir() / (name + ".json"));
  if (!f) throw std::runtime_error("cannot read golden " + name);
  return json::parse(f);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The case's variables: the template's special tokens, then the case's kwargs.
json variables(const json& golden, const json& c) {
  json vars = golden.contains("variables") ? golden["variables"] : json::object();
  for (const auto& [k, v] : c["kwargs"].items()) vars[k] = v;
  return vars;
}

// Checks one golden case; `source` is the template text.
void check_case(const json& golden, const json& c, const std::string& source) {
  SCOPED_TRACE(c["name"].get<std::string>());
  const bool parse_error = c.value("error_phase", "") == "parse";
  if (parse_error) {
    try {
      ChatTemplate t(source);
      ADD_FAILURE() << "parsed, but the reference fails with: " << c["error"];
    } catch (const Error& e) {
      EXPECT_EQ(e.code, ErrorCode::BadGraph);
      if (c.contains("error_line")) {
        const std::string want = "line " + std::to_string(c["error_line"].get<int>()) + ",";
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what() << "\nwant " << want;
      }
    }
    return;
  }
  ChatTemplate t(source);
  const json vars = variables(golden, c);
  if (c.contains("expected")) {
    std::string got;
    try {
      got = t.render(c["messages"], c["add_generation_prompt"].get<bool>(), vars);
    } catch (const Error& e) {
      ADD_FAILURE() << "render failed: " << e.what();
      return;
    }
    EXPECT_EQ(got, c["expected"].get<std::string>());
    return;
  }
  try {
    const std::string got = t.render(c["messages"], c["add_generation_prompt"].get<bool>(), vars);
    ADD_FAILURE() << "rendered, but the reference fails with " << c["error"] << "; got:\n" << got;
  } catch (const Error& e) {
    EXPECT_EQ(e.code, ErrorCode::BadGraph);
    if (!c["error"].is_null()) {  // null: the reference crashed (a JavaScript TypeError); only failing matters
      const std::string want = c["error"].get<std::string>(), msg = e.what();
      EXPECT_TRUE(msg == want || starts_with(msg, want + " (line ")) << msg << "\nwant " << want;
    }
  }
}

class ChatTemplateGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGolden, RendersLikeReference) {
  const json golden = read_golden(GetParam());
  ASSERT_TRUE(golden["template"].is_string());
  ASSERT_FALSE(golden["cases"].empty());
  for (const auto& c : golden["cases"]) check_case(golden, c, golden["template"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(ChatTemplate, ChatTemplateGolden,
                         ::testing::Values("llama3", "qwen3", "gemma3", "deepseek_v3", "chatml", "mistral_v0_1",
                                           "phi3", "llama2_chat", "llama31_tools"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(JinjaFeatures, RenderLikeReference) {
  const json golden = read_golden("features");
  ASSERT_GT(golden["cases"].size(), 50u);
  for (const auto& c : golden["cases"]) check_case(golden, c, c["template"].get<std::string>());
}

// Unknown constructs must be errors that name the construct and where it is.
TEST(JinjaFeatures, UnknownConstructsAreNamed) {
  const json golden = read_golden("features");
  int checked = 0;
  for (const auto& c : golden["cases"]) {
    const std::string name = c["name"];
    if (!starts_with(name, "err_unknown_") && name != "syntax_unknown_tag") continue;
    SCOPED_TRACE(name);
    ++checked;
    try {
      ChatTemplate t(c["template"].get<std::string>());
      t.render(c["messages"], false, c["kwargs"]);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("frobnicate"), std::string::npos) << msg;
      EXPECT_NE(msg.find("line "), std::string::npos) << msg;
    }
  }
  EXPECT_GE(checked, 6);
}

// The error of a multi-line template points at the failing line.
TEST(JinjaFeatures, RenderErrorNamesLine) {
  ChatTemplate t("a\n{% if true %}\n  {{ 'x'|frobnicate }}\n{% endif %}");
  try {
    t.render(json::array(), false, json::object());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::regex_search(std::string(e.what()), std::regex("\\(line 3\\)$"))) << e.what();
  }
}

// A hostile template fails with an Error instead of exhausting the stack.
TEST(JinjaFeatures, RunawayTemplatesFail) {
  EXPECT_THROW(ChatTemplate("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}").render(json::array(), false, json()),
               Error);
  EXPECT_THROW(ChatTemplate("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), Error);
  EXPECT_THROW(ChatTemplate("{% for i in range(1000000000) %}x{% endfor %}").render(json::array(), false, json()),
               Error);
}

// Indices and slice bounds far past any length (an integer literal of 48
// digits, as the fuzzer wrote one) are out of range, as jinja2 has them:
// nothing, or the whole list, never undefined behaviour.
TEST(JinjaFeatures, HugeIndicesAreOutOfRange) {
  const std::string huge = "188888888888888888888888888888888888888888888888";
  const auto render = [](const std::string& src) { return ChatTemplate(src).render(json::array(), false, json()); };
  EXPECT_EQ(render("[{{ [1, 2, 3][" + huge + "] }}]"), "[]");
  EXPECT_EQ(render("[{{ [1, 2, 3][-" + huge + "] }}]"), "[]");
  EXPECT_EQ(render("[{{ 'abc'[" + huge + "] }}]"), "[]");
  EXPECT_EQ(render("{{ [1, 2, 3][-" + huge + ":" + huge + "] }}"), "[1, 2, 3]");
  EXPECT_EQ(render("{{ [1, 2, 3][::" + huge + "] }}"), "[1]");
  EXPECT_EQ(render("{{ [1, 2, 3][::-" + huge + "] }}"), "[3]");
}

// strftime_now reads the local clock; libc's strftime of the same moment is
// the reference (the goldens can only check the directives that do not move).
TEST(JinjaFeatures, StrftimeNowMatchesLibc) {
  const ChatTemplate t("{{ strftime_now('%Y-%m-%d|%d %b %Y|%B') }}");
  const std::string got = t.render(json::array(), false, json());
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char want[128];
  std::strftime(want, sizeof want, "%Y-%m-%d|%d %b %Y|%B", &tm);
  EXPECT_EQ(got, want);
}

TEST(ChatTemplateLoader, ReadsTemplateAndSpecialTokens) {
  for (const char* name : {"llama3", "qwen3", "gemma3", "deepseek_v3"}) {
    SCOPED_TRACE(name);
    const json golden = read_golden(name);
    json vars;
    const ChatTemplate t = load_chat_template((golden_dir() / golden["config"].get<std::string>()).string(), &vars);
    EXPECT_EQ(t.source(), golden["template"].get<std::string>());
    EXPECT_EQ(vars, golden["variables"]);
    const json& c = golden["cases"][0];
    ASSERT_TRUE(c.contains("expected"));
    EXPECT_EQ(t.render(c["messages"], c["add_generation_prompt"].get<bool>(), vars), c["expected"].get<std::string>());
  }
}

TEST(ChatTemplateLoader, RefusesConfigWithoutTemplate) {
  const json golden = read_golden("llama2");
  ASSERT_TRUE(golden["template"].is_null());
  ASSERT_TRUE(golden["error"].is_string());  // the reference refuses too
  try {
    load_chat_template((golden_dir() / "configs" / "llama2.json").string(), nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos) << e.what();
  }
}

// A list of named templates: "default" is used.
TEST(ChatTemplateLoader, NamedTemplateList) {
  const json chatml = read_golden("chatml"), phi3 = read_golden("phi3");
  json config;
  config["chat_template"] = json::array({{{"name", "tool_use"}, {"template", phi3["template"]}},
                                         {{"name", "default"}, {"template", chatml["template"]}}});
  config["bos_token"] = {{"content", "<s>"}, {"lstrip", false}};
  config["eos_token"] = "<|im_end|>";
  const auto path = std::filesystem::temp_directory_path() / "bonfire_chat_template_list.json";
  std::ofstream(path) << config.dump();
  json vars;
  const ChatTemplate t = load_chat_template(path.string(), &vars);
  EXPECT_EQ(t.source(), chatml["template"].get<std::string>());
  EXPECT_EQ(vars, chatml["variables"]);
  const json& c = chatml["cases"][0];
  EXPECT_EQ(t.render(c["messages"], c["add_generation_prompt"].get<bool>(), vars), c["expected"].get<std::string>());

  config["chat_template"].erase(1);
  std::ofstream(path) << config.dump();
  EXPECT_THROW(load_chat_template(path.string(), nullptr), Error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace bonfire
