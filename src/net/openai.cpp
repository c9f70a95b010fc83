#include "net/openai.h"

#include "net/request_fields.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <set>

namespace bonfire::net {

using json = nlohmann::json;

namespace {

// One set of rules with /api/v3/generate (net/request_fields.h).
using fields::as_int64;
using fields::boolean;
using fields::fail;
using fields::number_in;
const json* field(const json& body, const char* name) { return fields::find(body, name); }

std::optional<int64_t> max_tokens_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  auto n = as_int64(*v);
  if (!n || *n < 0) fail(name, std::string(name) + " must be a non-negative integer");
  return n;
}

std::vector<std::string> stop_field(const json& body) {
  const json* v = field(body, "stop");
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) fail("stop", "stop must be a string or a list of at most 4 strings");
  if (v->size() > 4) fail("stop", "stop: at most 4 stop strings (got " + std::to_string(v->size()) + ")");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& s = (*v)[i];
    const std::string path = "stop[" + std::to_string(i) + "]";
    if (!s.is_string()) fail(path, path + " must be a string");
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int32_t>> token_list(const json& v, const std::string& path) {
  return fields::token_list(v, path);
}

void parse_prompt(const json& body, OpenAiCall& call) {
  const json* v = field(body, "prompt");
  if (!v) fail("prompt", "prompt is required");
  const char* shape = "prompt must be a string, a list of one string, or a list of token ids";
  if (v->is_string()) {
    call.prompt = v->get<std::string>();
    return;
  }
  if (!v->is_array()) fail("prompt", shape);
  if (v->empty()) fail("prompt", "prompt must not be an empty list");
  if (auto ids = token_list(*v, "prompt")) {
    call.request.prompt = std::move(*ids);
    call.prompt_is_tokens = true;
    return;
  }
  // A list of prompts (strings or token lists): OpenAI's batch form.
  if (v->size() > 1)
    fail("prompt", "prompt: only one prompt per request is supported (got " + std::to_string(v->size()) + ")");
  const json& only = (*v)[0];
  if (only.is_string()) {
    call.prompt = only.get<std::string>();
    return;
  }
  if (only.is_array() && only.empty()) fail("prompt[0]", "prompt[0] must not be an empty list");
  if (auto ids = token_list(only, "prompt[0]")) {
    call.request.prompt = std::move(*ids);
    call.prompt_is_tokens = true;
    return;
  }
  fail("prompt", shape);
}

std::string message_content(const json& m, const std::string& path) {
  const std::string where = path + ".content";
  const char* shape = " must be a string or a list of text parts";
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) fail(where, where + shape);
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) fail(where, where + shape);
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string p = where + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      fail(p, p + " must be an object {\"type\": \"text\", \"text\": ...}");
    const std::string type = part["type"].get<std::string>();
    if (type != "text") fail(p, p + ": only text parts are supported (got \"" + type + "\")");
    if (!part.contains("text") || !part["text"].is_string()) fail(p + ".text", p + ".text must be a string");
    if (i > 0) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

json parse_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) fail("messages", "messages is required");
  if (!v->is_array() || v->empty()) fail("messages", "messages must be a non-empty list of {role, content}");
  json out = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string path = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) fail(path, path + " must be an object {role, content}");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || role->get<std::string>().empty())
      fail(path + ".role", path + ".role must be a non-empty string");
    if (const json* calls = field(m, "tool_calls"); calls && !(calls->is_array() && calls->empty()))
      fail(path + ".tool_calls", path + ".tool_calls: tool calls are not supported");
    std::string r = role->get<std::string>();
    // OpenAI's roles; a template given another one would render it as
    // text the model was never trained on.
    static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
    if (!kRoles.count(r))
      fail(path + ".role", path + ".role \"" + bounded_text(r, 64) +
                               "\" is not one of system, developer, user, assistant, tool");
    if (r == "developer") r = "system";
    out.push_back({{"role", r}, {"content", message_content(m, path)}});
  }
  return out;
}

// A field that asks for something bonfire does not do, unless it holds the
// "off" value.
void refuse_unless(const json& body, const char* name, const std::function<bool(const json&)>& off,
                   const std::string& message) {
  const json* v = field(body, name);
  if (v && !off(*v)) fail(name, message);
}

bool is_false(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool is_zero(const json& v) { return v.is_number() && v.get<double>() == 0; }
bool is_one(const json& v) { return v.is_number() && v.get<double>() == 1; }
bool is_empty(const json& v) { return (v.is_string() || v.is_array() || v.is_object()) && v.empty(); }

void refuse_unsupported(const json& body) {
  refuse_unless(body, "n", is_one, "n: only 1 choice is supported");
  refuse_unless(body, "best_of", is_one, "best_of: only 1 is supported");
  // Completions' logprobs: 0 still asks for the sampled tokens' logprobs.
  refuse_unless(body, "logprobs", is_false, "logprobs are not supported");
  refuse_unless(body, "top_logprobs", is_zero, "top_logprobs: logprobs are not supported");
  refuse_unless(body, "echo", is_false, "echo is not supported");
  refuse_unless(body, "suffix", is_empty, "suffix is not supported");
  refuse_unless(body, "logit_bias", is_empty, "logit_bias is not supported");
  refuse_unless(body, "tools", is_empty, "tools are not supported");
  refuse_unless(body, "functions", is_empty, "functions are not supported");
  refuse_unless(
      body, "response_format", [](const json& v) { return v.is_object() && v.value("type", json()) == "text"; },
      "response_format: only {\"type\": \"text\"} is supported");
}

void parse_sampling(const json& body, ir::SamplingParams& s) {
  s.temperature = number_in(body, "temperature", 0, 2, 1);
  const double top_p = number_in(body, "top_p", 0, 1, 1);
  if (const json* k = field(body, "top_k")) {
    auto v = as_int64(*k);
    if (!v) fail("top_k", "top_k must be an integer (0 or less: off)");
    s.top_k = std::max<int64_t>(*v, 0);
  }
  s.set_top_p(top_p);
  s.seed = fields::seed(body, "seed", std::nullopt);  // absent: a fresh sample per request
  s.presence_penalty = number_in(body, "presence_penalty", -2, 2, 0);
  if (number_in(body, "frequency_penalty", -2, 2, 0) != 0)
    fail("frequency_penalty",
         "frequency_penalty is not supported (only 0): bonfire's sampler penalises each distinct token once, "
         "not once per occurrence; use presence_penalty (subtracted once for each token in the last " +
             std::to_string(s.penalty_window) + " positions) or repetition_penalty (> 1 pushes those tokens down)");
  if (const json* r = field(body, "repetition_penalty")) {
    s.repetition_penalty = r->is_number() ? r->get<double>() : NAN;
    if (!(s.repetition_penalty > 0 && std::isfinite(s.repetition_penalty)))
      fail("repetition_penalty", "repetition_penalty must be a finite number > 0 (1 = off)");
  }
}

}  // namespace

OpenAiCall parse_openai_request(const json& body, bool chat,
                                const std::function<std::string(const json& messages)>& apply_template) {
  if (!body.is_object()) fail("", "the request body must be a JSON object");
  OpenAiCall call;
  call.chat = chat;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) fail("model", "model must be a string");
    call.model = m->get<std::string>();
  }
  refuse_unsupported(body);
  call.stream = boolean(body, "stream", false);
  call.verify = boolean(body, "verify", false);  // bonfire's own (docs/PROTOCOL-EXTENSIONS.md)
  if (const json* o = field(body, "stream_options")) {
    if (!o->is_object()) fail("stream_options", "stream_options must be an object");
    const json* usage = field(*o, "include_usage");
    if (usage && !usage->is_boolean())
      fail("stream_options.include_usage", "stream_options.include_usage must be true or false");
    call.include_usage = call.stream && usage && usage->get<bool>();
  }

  auto max_tokens = max_tokens_field(body, "max_tokens");
  auto max_completion = max_tokens_field(body, "max_completion_tokens");
  if (max_tokens && max_completion && *max_tokens != *max_completion)
    fail("max_completion_tokens", "max_tokens (" + std::to_string(*max_tokens) + ") and max_completion_tokens (" +
                                      std::to_string(*max_completion) + ") differ: give one");
  call.request.max_tokens = max_tokens ? *max_tokens : max_completion ? *max_completion : kOpenAiDefaultMaxTokens;
  parse_sampling(body, call.request.sampling);
  call.request.stop = stop_field(body);

  if (chat) {
    const json messages = parse_messages(body);
    call.prompt = apply_template(messages);
    call.add_special = false;
  } else {
    parse_prompt(body, call);
    call.add_special = true;
  }
  call.add_special = boolean(body, "add_special_tokens", call.add_special);
  return call;
}

std::string openai_finish_reason(const std::string& bonfire_reason) {
  if (bonfire_reason == "eos" || bonfire_reason == "stop") return "stop";
  return bonfire_reason;
}

std::string openai_id(bool chat) {
  static const char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  thread_local std::mt19937_64 rng{(static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()};
  std::string id = chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof kChars - 1)];
  return id;
}

namespace {

json usage(const ir::GenerateResult& r) {
  const int64_t completion = static_cast<int64_t>(r.tokens.size());
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", r.prompt_tokens + completion}};
}

json envelope(const OpenAiCall& call, const char* chat_object, const std::string& model_id, const std::string& id,
              int64_t created) {
  return {
      {"id", id}, {"object", call.chat ? chat_object : "text_completion"}, {"created", created}, {"model", model_id}};
}

}  // namespace

json openai_response(const OpenAiCall& call, const ir::GenerateResult& result, const std::string& model_id,
                     const std::string& id, int64_t created) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish_reason(result.finish_reason)}};
  if (call.chat)
    choice["message"] = {{"role", "assistant"}, {"content", result.text}};
  else
    choice["text"] = result.text;
  json r = envelope(call, "chat.completion", model_id, id, created);
  r["choices"] = json::array({choice});
  r["usage"] = usage(result);
  return r;
}

json openai_chunk(const OpenAiCall& call, const std::string& piece, const std::string& model_id, const std::string& id,
                  int64_t created, bool first, const std::string& finish) {
  json choice = {{"index", 0}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish.empty() ? json(nullptr) : json(openai_finish_reason(finish));
  if (call.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!piece.empty() || finish.empty()) delta["content"] = piece;
    choice["delta"] = delta;
  } else {
    choice["text"] = piece;
  }
  json c = envelope(call, "chat.completion.chunk", model_id, id, created);
  c["choices"] = json::array({choice});
  if (call.include_usage) c["usage"] = nullptr;
  return c;
}

json openai_usage_chunk(const OpenAiCall& call, const ir::GenerateResult& result, const std::string& model_id,
                        const std::string& id, int64_t created) {
  json c = envelope(call, "chat.completion.chunk", model_id, id, created);
  c["choices"] = json::array();
  c["usage"] = usage(result);
  return c;
}

json openai_error(const Error& e) {
  return openai_error(e.what(), error_code_name(e.code), error_http_status(e.code), e.node);
}

json openai_error(const std::string& message, const std::string& code, int status, const std::string& param) {
  return {{"error",
           {{"message", bounded_text(message, 2048)},
            {"type", status < 500 ? "invalid_request_error" : "server_error"},
            {"param", param.empty() ? json(nullptr) : json(bounded_text(param, 256))},
            {"code", code}}}};
}

json openai_model(const std::string& id, int64_t created) {
  return {{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "bonfire"}};
}

json openai_models(const std::vector<std::string>& ids, int64_t created) {
  json data = json::array();
  for (const auto& id : ids) data.push_back(openai_model(id, created));
  return {{"object", "list"}, {"data", data}};
}

}  // namespace bonfire::net
