// The OpenAI-compatible translation (src/net/openai.h): every accepted field
// lands where bonfire's sampler reads it, every refusal names its field, the
// response and chunk objects have the shapes OpenAI documents, and a chat
// request renders through a real model's template and tokenizes with one BOS.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "ir/generation.h"
#include "model/model_files.h"
#include "net/openai.h"
#include "test_models.h"

namespace bonfire::net {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Chat requests in these tests render to the messages' JSON, so a test sees
// exactly what the template was given.
std::string echo_template(const json& messages) { return messages.dump(); }

OpenAiCall completion(const json& body) { return parse_openai_request(body, false, echo_template); }
OpenAiCall chat(const json& body) { return parse_openai_request(body, true, echo_template); }

// The Error a body is refused with; fails the test when it is accepted.
Error refusal(const json& body, bool is_chat) {
  try {
    parse_openai_request(body, is_chat, echo_template);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return Error(ErrorCode::Internal, "accepted");
}

TEST(OpenAiRequest, CompletionDefaults) {
  const OpenAiCall c = completion({{"prompt", "Once upon"}});
  EXPECT_FALSE(c.chat);
  EXPECT_FALSE(c.stream);
  EXPECT_FALSE(c.include_usage);
  EXPECT_EQ(c.model, "");
  EXPECT_EQ(c.prompt, "Once upon");
  EXPECT_TRUE(c.request.prompt.empty());
  EXPECT_FALSE(c.prompt_is_tokens);
  EXPECT_TRUE(c.add_special);
  EXPECT_EQ(c.request.max_tokens, 256);
  EXPECT_EQ(c.request.sampling.temperature, 1.0);  // OpenAI's default
  EXPECT_EQ(c.request.sampling.top_p, 1.0);
  EXPECT_EQ(c.request.sampling.top_k, 0);
  EXPECT_EQ(c.request.sampling.presence_penalty, 0.0);
  EXPECT_EQ(c.request.sampling.repetition_penalty, 1.0);
  EXPECT_EQ(c.request.sampling.penalty_window, 64);
  EXPECT_TRUE(c.request.stop.empty());
  EXPECT_FALSE(c.request.ignore_eos);
}

TEST(OpenAiRequest, EveryFieldLandsWhereTheSamplerReadsIt) {
  const json body = {{"model", "tiny-llama"},
                     {"prompt", "x"},
                     {"max_tokens", 17},
                     {"temperature", 0.7},
                     {"top_p", 0.9},
                     {"top_k", 40},
                     {"seed", 1234},
                     {"stop", {"\n\n", "END"}},
                     {"presence_penalty", 0.5},
                     {"frequency_penalty", 0},
                     {"repetition_penalty", 1.1},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}},
                     {"n", 1},
                     {"best_of", 1},
                     {"echo", false},
                     {"logprobs", nullptr},
                     {"user", "someone"},
                     {"some_future_field", {{"a", 1}}}};
  const OpenAiCall c = completion(body);
  EXPECT_EQ(c.model, "tiny-llama");
  EXPECT_EQ(c.request.max_tokens, 17);
  EXPECT_EQ(c.request.sampling.temperature, 0.7);
  EXPECT_EQ(c.request.sampling.top_p, 0.9);
  EXPECT_EQ(c.request.sampling.top_k, 40);
  EXPECT_EQ(c.request.sampling.seed, 1234.0);
  EXPECT_EQ(c.request.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(c.request.sampling.presence_penalty, 0.5);
  EXPECT_EQ(c.request.sampling.repetition_penalty, 1.1);
  EXPECT_TRUE(c.stream);
  EXPECT_TRUE(c.include_usage);
}

TEST(OpenAiRequest, NullMeansAbsent) {
  const OpenAiCall c = completion({{"prompt", "x"},
                                   {"max_tokens", nullptr},
                                   {"temperature", nullptr},
                                   {"top_p", nullptr},
                                   {"seed", nullptr},
                                   {"stop", nullptr},
                                   {"n", nullptr},
                                   {"stream", nullptr},
                                   {"stream_options", nullptr},
                                   {"model", nullptr}});
  EXPECT_EQ(c.request.max_tokens, 256);
  EXPECT_EQ(c.request.sampling.temperature, 1.0);
  EXPECT_TRUE(c.request.stop.empty());
  EXPECT_FALSE(c.stream);
  EXPECT_EQ(c.model, "");
}

TEST(OpenAiRequest, PromptForms) {
  EXPECT_EQ(completion({{"prompt", json::array({"only one"})}}).prompt, "only one");
  EXPECT_EQ(completion({{"prompt", ""}}).prompt, "");

  const OpenAiCall ids = completion({{"prompt", {5, 6, 7.0}}});
  EXPECT_TRUE(ids.prompt_is_tokens);
  EXPECT_EQ(ids.request.prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(ids.prompt, "");

  const OpenAiCall nested = completion({{"prompt", json::array({json::array({9, 8})})}});
  EXPECT_TRUE(nested.prompt_is_tokens);
  EXPECT_EQ(nested.request.prompt, (std::vector<int32_t>{9, 8}));
}

TEST(OpenAiRequest, MaxTokensAndMaxCompletionTokens) {
  EXPECT_EQ(completion({{"prompt", "x"}, {"max_tokens", 0}}).request.max_tokens, 0);
  EXPECT_EQ(completion({{"prompt", "x"}, {"max_tokens", 12.0}}).request.max_tokens, 12);
  EXPECT_EQ(
      chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_completion_tokens", 9}}).request.max_tokens,
      9);
  EXPECT_EQ(completion({{"prompt", "x"}, {"max_tokens", 5}, {"max_completion_tokens", 5}}).request.max_tokens, 5);
  const Error e = refusal({{"prompt", "x"}, {"max_tokens", 5}, {"max_completion_tokens", 6}}, false);
  EXPECT_EQ(std::string(e.what()), "max_tokens (5) and max_completion_tokens (6) differ: give one");
}

TEST(OpenAiRequest, Seed) {
  EXPECT_EQ(completion({{"prompt", "x"}, {"seed", -1}}).request.sampling.seed, -1.0);
  EXPECT_EQ(completion({{"prompt", "x"}, {"seed", uint64_t(1) << 63}}).request.sampling.seed, 0x1p63);
  // Absent: a random integer per request, exact in a double.
  const double a = completion({{"prompt", "x"}}).request.sampling.seed;
  const double b = completion({{"prompt", "x"}}).request.sampling.seed;
  EXPECT_NE(a, b);
  for (double s : {a, b}) {
    EXPECT_EQ(s, std::floor(s));
    EXPECT_GE(s, 0);
    EXPECT_LT(s, 0x1p53);
  }
}

TEST(OpenAiRequest, TopPZeroAndTopKOff) {
  // bonfire's sampler takes top_p in (0, 1]; 0 means "only the most likely".
  const OpenAiCall z = completion({{"prompt", "x"}, {"top_p", 0}, {"top_k", 50}});
  EXPECT_EQ(z.request.sampling.top_p, 1.0);
  EXPECT_EQ(z.request.sampling.top_k, 1);
  EXPECT_EQ(completion({{"prompt", "x"}, {"top_k", -1}}).request.sampling.top_k, 0);  // vLLM's "off"
  EXPECT_EQ(completion({{"prompt", "x"}, {"top_k", 0}}).request.sampling.top_k, 0);   // llama.cpp's
}

TEST(OpenAiRequest, Stop) {
  EXPECT_EQ(completion({{"prompt", "x"}, {"stop", "\n"}}).request.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(completion({{"prompt", "x"}, {"stop", {"a", "", "b", "c"}}}).request.stop,
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(completion({{"prompt", "x"}, {"stop", ""}}).request.stop.empty());
  EXPECT_TRUE(completion({{"prompt", "x"}, {"stop", json::array()}}).request.stop.empty());
}

TEST(OpenAiRequest, StreamOptionsWithoutStreamAreHarmless) {
  const OpenAiCall c = completion({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}});
  EXPECT_FALSE(c.stream);
  EXPECT_FALSE(c.include_usage);  // the response carries usage anyway
}

struct Refused {
  json body;
  bool chat;
  std::string message;  // the whole message, or a prefix ending in "..."
  std::string param;
};

TEST(OpenAiRequest, RefusalsNameTheirField) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const json msgs = json::array({user});
  auto with = [&](json extra) {
    json b = {{"prompt", "x"}};
    b.update(extra);
    return b;
  };
  auto chat_with = [&](json extra) {
    json b = {{"messages", msgs}};
    b.update(extra);
    return b;
  };
  const std::vector<Refused> cases = {
      {json::array(), false, "the request body must be a JSON object", ""},
      {{{"max_tokens", 3}}, false, "prompt is required", "prompt"},
      {with({{"prompt", 5}}), false, "prompt must be a string, a list of one string, or a list of token ids", "prompt"},
      {with({{"prompt", json::array()}}), false, "prompt must not be an empty list", "prompt"},
      {with({{"prompt", {"a", "b"}}}), false, "prompt: only one prompt per request is supported (got 2)", "prompt"},
      {with({{"prompt", {1, -2}}}), false, "prompt[1] must be a token id (an integer in [0, 2^31))", "prompt"},
      {with({{"prompt", {1, 2.5}}}), false, "prompt[1] must be a token id (an integer in [0, 2^31))", "prompt"},
      {with({{"prompt", {1, "a"}}}), false, "prompt[1] must be a token id (an integer in [0, 2^31))", "prompt"},
      {with({{"prompt", {int64_t(1) << 31}}}), false, "prompt[0] must be a token id (an integer in [0, 2^31))",
       "prompt"},
      {with({{"prompt", json::array({json::array()})}}), false, "prompt[0] must not be an empty list", "prompt[0]"},
      {with({{"prompt", json::array({json::object()})}}), false,
       "prompt must be a string, a list of one string, or a list of token ids", "prompt"},
      {with({{"model", 3}}), false, "model must be a string", "model"},
      {with({{"max_tokens", -1}}), false, "max_tokens must be a non-negative integer", "max_tokens"},
      {with({{"max_tokens", 2.5}}), false, "max_tokens must be a non-negative integer", "max_tokens"},
      {with({{"max_tokens", "10"}}), false, "max_tokens must be a non-negative integer", "max_tokens"},
      {with({{"max_completion_tokens", -4}}), false, "max_completion_tokens must be a non-negative integer",
       "max_completion_tokens"},
      {with({{"temperature", 2.5}}), false, "temperature must be a number in [0, 2]", "temperature"},
      {with({{"temperature", -0.1}}), false, "temperature must be a number in [0, 2]", "temperature"},
      {with({{"temperature", "hot"}}), false, "temperature must be a number in [0, 2]", "temperature"},
      {with({{"top_p", 1.5}}), false, "top_p must be a number in [0, 1]", "top_p"},
      {with({{"top_k", 1.5}}), false, "top_k must be an integer (0 or less: off)", "top_k"},
      {with({{"seed", 1.5}}), false, "seed must be an integer in [-2^63, 2^64)", "seed"},
      {with({{"seed", "7"}}), false, "seed must be an integer in [-2^63, 2^64)", "seed"},
      {with({{"seed", std::numeric_limits<uint64_t>::max()}}), false, "seed must be an integer in [-2^63, 2^64)",
       "seed"},
      {with({{"stop", 3}}), false, "stop must be a string or a list of at most 4 strings", "stop"},
      {with({{"stop", {"a", "b", "c", "d", "e"}}}), false, "stop: at most 4 stop strings (got 5)", "stop"},
      {with({{"stop", {"a", 1}}}), false, "stop[1] must be a string", "stop[1]"},
      {with({{"presence_penalty", 3}}), false, "presence_penalty must be a number in [-2, 2]", "presence_penalty"},
      {with({{"frequency_penalty", -3}}), false, "frequency_penalty must be a number in [-2, 2]", "frequency_penalty"},
      {with({{"frequency_penalty", 0.5}}), false, "frequency_penalty is not supported (only 0): ...",
       "frequency_penalty"},
      {with({{"repetition_penalty", 0}}), false, "repetition_penalty must be a finite number > 0 (1 = off)",
       "repetition_penalty"},
      {with({{"stream", "yes"}}), false, "stream must be true or false", "stream"},
      {with({{"stream", true}, {"stream_options", true}}), false, "stream_options must be an object", "stream_options"},
      {with({{"stream", true}, {"stream_options", {{"include_usage", 1}}}}), false,
       "stream_options.include_usage must be true or false", "stream_options.include_usage"},
      {with({{"add_special_tokens", "no"}}), false, "add_special_tokens must be true or false", "add_special_tokens"},
      {with({{"n", 2}}), false, "n: only 1 choice is supported", "n"},
      {with({{"best_of", 3}}), false, "best_of: only 1 is supported", "best_of"},
      {with({{"logprobs", 0}}), false, "logprobs are not supported", "logprobs"},
      {chat_with({{"logprobs", true}}), true, "logprobs are not supported", "logprobs"},
      {chat_with({{"top_logprobs", 2}}), true, "top_logprobs: logprobs are not supported", "top_logprobs"},
      {with({{"echo", true}}), false, "echo is not supported", "echo"},
      {with({{"suffix", "tail"}}), false, "suffix is not supported", "suffix"},
      {with({{"logit_bias", {{"50256", -100}}}}), false, "logit_bias is not supported", "logit_bias"},
      {chat_with({{"tools", {{{"type", "function"}}}}}), true, "tools are not supported", "tools"},
      {chat_with({{"functions", {{{"name", "f"}}}}}), true, "functions are not supported", "functions"},
      {chat_with({{"response_format", {{"type", "json_object"}}}}), true,
       "response_format: only {\"type\": \"text\"} is supported", "response_format"},
      {json::object(), true, "messages is required", "messages"},
      {{{"messages", json::array()}}, true, "messages must be a non-empty list of {role, content}", "messages"},
      {{{"messages", "hi"}}, true, "messages must be a non-empty list of {role, content}", "messages"},
      {{{"messages", {user, "hi"}}}, true, "messages[1] must be an object {role, content}", "messages[1]"},
      {{{"messages", {user, {{"content", "x"}}}}},
       true,
       "messages[1].role must be a non-empty string",
       "messages[1].role"},
      {{{"messages", {user, {{"role", "wizard"}, {"content", "x"}}}}},
       true,
       "messages[1].role \"wizard\" is not one of system, developer, user, assistant, tool",
       "messages[1].role"},
      {{{"messages", {user, {{"role", "user"}, {"content", 5}}}}},
       true,
       "messages[1].content must be a string or a list of text parts",
       "messages[1].content"},
      {{{"messages", {user, {{"role", "assistant"}, {"content", nullptr}}}}},
       true,
       "messages[1].content must be a string or a list of text parts",
       "messages[1].content"},
      {{{"messages", {user, {{"role", "user"}}}}},
       true,
       "messages[1].content must be a string or a list of text parts",
       "messages[1].content"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}},
       true,
       "messages[0].content[0]: only text parts are supported (got \"image_url\")",
       "messages[0].content[0]"},
      {{{"messages", {{{"role", "user"}, {"content", {"plain"}}}}}},
       true,
       "messages[0].content[0] must be an object {\"type\": \"text\", \"text\": ...}",
       "messages[0].content[0]"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}}},
       true,
       "messages[0].content[0].text must be a string",
       "messages[0].content[0].text"},
      {{{"messages",
         {user, {{"role", "assistant"}, {"content", ""}, {"tool_calls", {{{"id", "c1"}, {"type", "function"}}}}}}}},
       true,
       "messages[1].tool_calls: tool calls are not supported",
       "messages[1].tool_calls"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body.dump());
    const Error e = refusal(c.body, c.chat);
    EXPECT_EQ(e.code, ErrorCode::BadGraph);
    const std::string msg = e.what();
    if (c.message.size() > 3 && c.message.substr(c.message.size() - 3) == "...") {
      EXPECT_EQ(msg.substr(0, c.message.size() - 3), c.message.substr(0, c.message.size() - 3)) << msg;
    } else {
      EXPECT_EQ(msg, c.message);
    }
    EXPECT_EQ(e.node, c.param);
  }
}

TEST(OpenAiRequest, FrequencyPenaltyRefusalSaysWhatToUseInstead) {
  const std::string msg = refusal({{"prompt", "x"}, {"frequency_penalty", 1}}, false).what();
  EXPECT_NE(msg.find("presence_penalty"), std::string::npos) << msg;
  EXPECT_NE(msg.find("repetition_penalty"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
}

TEST(OpenAiRequest, ChatMessagesReachTheTemplate) {
  json seen;
  const json body = {
      {"model", "m"},
      {"messages",
       {{{"role", "developer"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}, {{"type", "text"}, {"text", "there"}}}}},
        {{"role", "assistant"}, {"content", "Hello."}, {"name", "bot"}},
        {{"role", "user"}, {"content", "Again"}}}}};
  const OpenAiCall c = parse_openai_request(body, true, [&](const json& m) {
    seen = m;
    return std::string("RENDERED");
  });
  EXPECT_TRUE(c.chat);
  EXPECT_EQ(c.prompt, "RENDERED");
  EXPECT_FALSE(c.add_special);
  EXPECT_FALSE(c.prompt_is_tokens);
  const json want = {{{"role", "system"}, {"content", "Be brief."}},
                     {{"role", "user"}, {"content", "Hi\nthere"}},
                     {{"role", "assistant"}, {"content", "Hello."}},
                     {{"role", "user"}, {"content", "Again"}}};
  EXPECT_EQ(seen, want);
  // vLLM's extension puts the BOS back for a template that writes none.
  json again = body;
  again["add_special_tokens"] = true;
  EXPECT_TRUE(chat(again).add_special);
}

TEST(OpenAiRequest, TemplateErrorsPassThrough) {
  try {
    parse_openai_request({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, true, [](const json&) -> std::string {
      throw Error(ErrorCode::BadGraph, "m: the model has no chat template");
    });
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m: the model has no chat template");
  }
}

// A model folder with the test llama's tokenizer and Llama 3's chat template
// (goldens/templates/configs/llama3.json) in its tokenizer_config.json, as
// `bonfire template` reads one.
fs::path llama_with_template() {
  const fs::path hf = testing::test_model("llama", "f32") / "hf";
  if (!fs::exists(hf / "tokenizer.json")) return {};
  const fs::path dir = fs::temp_directory_path() / ("bonfire_openai_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* f : {"tokenizer.json", "config.json"})
    fs::copy_file(hf / f, dir / f, fs::copy_options::overwrite_existing);
  json config = json::parse(std::ifstream(hf / "tokenizer_config.json"));
  const json golden =
      json::parse(std::ifstream(fs::path(BONFIRE_SOURCE_DIR) / "goldens" / "templates" / "configs" / "llama3.json"));
  config["chat_template"] = golden["chat_template"];
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir;
}

TEST(OpenAiRequest, ChatThroughARealTemplateHasOneBos) {
  const fs::path dir = llama_with_template();
  ASSERT_FALSE(dir.empty());
  const auto files = ModelFiles::open(dir.string());
  nlohmann::ordered_json vars;
  const auto tmpl = files->chat_template(&vars);
  ASSERT_TRUE(tmpl.has_value());
  // What the server does: the model's template with the generation prompt.
  auto apply = [&](const json& messages) { return tmpl->render(nlohmann::ordered_json(messages), true, vars); };
  const json body = {
      {"messages",
       {{{"role", "developer"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}, {{"type", "text"}, {"text", "there"}}}}}}}};
  const OpenAiCall c = parse_openai_request(body, true, apply);
  EXPECT_EQ(c.prompt,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi\nthere<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");

  const auto tok = files->tokenizer();
  const std::vector<int32_t> bos = tok->encode("<|begin_of_text|>", false);
  ASSERT_EQ(bos.size(), 1u);
  const std::vector<int32_t> ids = tok->encode(c.prompt, c.add_special);
  EXPECT_EQ(ids[0], bos[0]);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bos[0]), 1);
  // The post-processor's BOS on top of the template's: what add_special=false avoids.
  const std::vector<int32_t> doubled = tok->encode(c.prompt, true);
  ASSERT_GE(doubled.size(), 2u);
  EXPECT_EQ(doubled[0], bos[0]);
  EXPECT_EQ(doubled[1], bos[0]);
  fs::remove_all(dir);
}

TEST(OpenAiRequest, ModelWithoutTemplateIsRefused) {
  const fs::path hf = testing::test_model("llama", "f32") / "hf";
  ASSERT_TRUE(fs::exists(hf / "tokenizer.json"));
  const auto files = ModelFiles::open(hf.string());
  // As the server renders: ModelFiles refuses a folder without a template.
  auto apply = [&](const json& messages) -> std::string {
    nlohmann::ordered_json vars;
    auto t = files->chat_template(&vars);
    if (!t) throw Error(ErrorCode::BadGraph, "the model has no chat template");
    return t->render(nlohmann::ordered_json(messages), true, vars);
  };
  try {
    parse_openai_request({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, true, apply);
    ADD_FAILURE() << "rendered without a template";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat"), std::string::npos) << e.what();
    EXPECT_EQ(openai_error(e)["error"]["type"], "invalid_request_error");
  }
}

ir::GenerateResult result(const std::string& text, std::vector<int32_t> tokens, int64_t prompt_tokens,
                          const std::string& finish) {
  ir::GenerateResult r;
  r.text = text;
  r.tokens = std::move(tokens);
  r.prompt_tokens = prompt_tokens;
  r.finish_reason = finish;
  return r;
}

TEST(OpenAiResponse, CompletionShape) {
  const OpenAiCall call = completion({{"prompt", "x"}});
  const json r = openai_response(call, result(" there", {7, 8, 9}, 4, "length"), "tiny", "cmpl-1", 1700000000);
  const json want = {
      {"id", "cmpl-1"},
      {"object", "text_completion"},
      {"created", 1700000000},
      {"model", "tiny"},
      {"choices", {{{"index", 0}, {"text", " there"}, {"logprobs", nullptr}, {"finish_reason", "length"}}}},
      {"usage", {{"prompt_tokens", 4}, {"completion_tokens", 3}, {"total_tokens", 7}}}};
  EXPECT_EQ(r, want);
}

TEST(OpenAiResponse, ChatShape) {
  const OpenAiCall call = chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  const json r = openai_response(call, result("Hello!", {1, 2}, 10, "eos"), "tiny", "chatcmpl-1", 5);
  const json want = {{"id", "chatcmpl-1"},
                     {"object", "chat.completion"},
                     {"created", 5},
                     {"model", "tiny"},
                     {"choices",
                      {{{"index", 0},
                        {"message", {{"role", "assistant"}, {"content", "Hello!"}}},
                        {"logprobs", nullptr},
                        {"finish_reason", "stop"}}}},
                     {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 2}, {"total_tokens", 12}}}};
  EXPECT_EQ(r, want);
}

TEST(OpenAiResponse, FinishReasons) {
  EXPECT_EQ(openai_finish_reason("eos"), "stop");
  EXPECT_EQ(openai_finish_reason("stop"), "stop");
  EXPECT_EQ(openai_finish_reason("length"), "length");
  EXPECT_EQ(openai_finish_reason("cancelled"), "cancelled");
  const OpenAiCall call = completion({{"prompt", "x"}});
  EXPECT_EQ(openai_response(call, result("a", {1}, 1, "stop"), "m", "i", 0)["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiStream, ChatChunks) {
  const OpenAiCall call = chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}});
  const json first = openai_chunk(call, "", "tiny", "chatcmpl-9", 42, true, "");
  const json want_first = {{"id", "chatcmpl-9"},
                           {"object", "chat.completion.chunk"},
                           {"created", 42},
                           {"model", "tiny"},
                           {"choices",
                            {{{"index", 0},
                              {"delta", {{"role", "assistant"}, {"content", ""}}},
                              {"logprobs", nullptr},
                              {"finish_reason", nullptr}}}}};
  EXPECT_EQ(first, want_first);
  EXPECT_FALSE(first.contains("usage"));

  const json mid = openai_chunk(call, "Hel", "tiny", "chatcmpl-9", 42, false, "");
  EXPECT_EQ(mid["choices"][0]["delta"], (json{{"content", "Hel"}}));
  EXPECT_TRUE(mid["choices"][0]["finish_reason"].is_null());

  const json last = openai_chunk(call, "", "tiny", "chatcmpl-9", 42, false, "eos");
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");

  // A piece and the finish in one chunk keep the piece.
  const json both = openai_chunk(call, "lo", "tiny", "chatcmpl-9", 42, false, "length");
  EXPECT_EQ(both["choices"][0]["delta"], (json{{"content", "lo"}}));
  EXPECT_EQ(both["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiStream, CompletionChunksAndUsage) {
  const OpenAiCall call =
      completion({{"prompt", "x"}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  const json c = openai_chunk(call, " wor", "tiny", "cmpl-3", 7, true, "");
  const json want = {{"id", "cmpl-3"},
                     {"object", "text_completion"},
                     {"created", 7},
                     {"model", "tiny"},
                     {"choices", {{{"index", 0}, {"text", " wor"}, {"logprobs", nullptr}, {"finish_reason", nullptr}}}},
                     {"usage", nullptr}};
  EXPECT_EQ(c, want);
  EXPECT_EQ(openai_chunk(call, "", "tiny", "cmpl-3", 7, false, "stop")["choices"][0]["finish_reason"], "stop");

  const json u = openai_usage_chunk(call, result(" world", {3, 4}, 6, "length"), "tiny", "cmpl-3", 7);
  const json want_u = {{"id", "cmpl-3"},
                       {"object", "text_completion"},
                       {"created", 7},
                       {"model", "tiny"},
                       {"choices", json::array()},
                       {"usage", {{"prompt_tokens", 6}, {"completion_tokens", 2}, {"total_tokens", 8}}}};
  EXPECT_EQ(u, want_u);
  const OpenAiCall chat_call = chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}});
  EXPECT_EQ(openai_usage_chunk(chat_call, result("", {}, 1, "eos"), "m", "i", 0)["object"], "chat.completion.chunk");
}

TEST(OpenAiError, Shapes) {
  const json bad = openai_error(Error(ErrorCode::BadGraph, "n: only 1 choice is supported", "n"));
  EXPECT_EQ(bad, (json{{"error",
                        {{"message", "n: only 1 choice is supported"},
                         {"type", "invalid_request_error"},
                         {"param", "n"},
                         {"code", "bad_graph"}}}}));
  const json big = openai_error(Error(ErrorCode::TooLarge, "the prompt has 9000 tokens"));
  EXPECT_EQ(big["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(big["error"]["param"].is_null());
  EXPECT_EQ(big["error"]["code"], "too_large");
  for (ErrorCode code : {ErrorCode::Internal, ErrorCode::NoWorker, ErrorCode::Timeout}) {
    const json e = openai_error(Error(code, "x"));
    EXPECT_EQ(e["error"]["type"], "server_error");
    EXPECT_EQ(e["error"]["code"], error_code_name(code));
  }
}

TEST(OpenAiModels, List) {
  EXPECT_EQ(openai_models({"a", "b"}, 11),
            (json{{"object", "list"},
                  {"data",
                   {{{"id", "a"}, {"object", "model"}, {"created", 11}, {"owned_by", "bonfire"}},
                    {{"id", "b"}, {"object", "model"}, {"created", 11}, {"owned_by", "bonfire"}}}}}));
  EXPECT_EQ(openai_models({}, 0)["data"], json::array());
}

TEST(OpenAiIds, FreshAndPrefixed) {
  const std::string a = openai_id(true), b = openai_id(true), c = openai_id(false);
  EXPECT_EQ(a.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(c.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(a.size(), 9u + 24u);
  EXPECT_NE(a, b);
}

// The whole path on a real (tiny, random) model: parse, tokenize as the call
// says, generate, then the response and the streamed chunks agree with it.
TEST(OpenAiEndToEnd, CompletionOnATestModel) {
  const fs::path hf = testing::test_model("llama", "f32") / "hf";
  ASSERT_TRUE(fs::exists(hf / "config.json"));
  ir::LocalModel::Options o;
  o.ctx = 64;
  auto model = ir::LocalModel::open(hf.string(), o);
  OpenAiCall call = completion({{"prompt", "Hello world"},
                                {"max_tokens", 6},
                                {"temperature", 0},
                                {"stream", true},
                                {"stream_options", {{"include_usage", true}}}});
  call.request.prompt = model->tokenizer().encode(call.prompt, call.add_special);
  EXPECT_EQ(call.request.prompt, model->encode_prompt("Hello world"));  // the same ids `bonfire generate` uses
  call.request.ignore_eos = true;

  std::string streamed;
  bool first = true;
  const ir::GenerateResult r = model->generate(call.request, [&](int32_t, const std::string& piece) {
    const json c = openai_chunk(call, piece, "tiny", "cmpl-e2e", 1, first, "");
    first = false;
    streamed += c["choices"][0]["text"].get<std::string>();
    return true;
  });
  const json last = openai_chunk(call, "", "tiny", "cmpl-e2e", 1, false, r.finish_reason);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(streamed, r.text);

  const json resp = openai_response(call, r, "tiny", "cmpl-e2e", 1);
  EXPECT_EQ(resp["choices"][0]["text"], r.text);
  EXPECT_EQ(resp["usage"]["prompt_tokens"], static_cast<int64_t>(call.request.prompt.size()));
  EXPECT_EQ(resp["usage"]["completion_tokens"], 6);
  EXPECT_EQ(openai_usage_chunk(call, r, "tiny", "cmpl-e2e", 1)["usage"], resp["usage"]);
}

}  // namespace
}  // namespace bonfire::net
