// Generation endpoints: POST /api/v3/generate (PROTOCOL.md) and the
// OpenAI-compatible /v1/completions and /v1/chat/completions, streamed as
// server-sent events or not. A client that disconnects mid-stream cancels
// its generation: the next write fails, the loop stops, the sessions go.
#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "graph/wire.h"
#include "net/openai.h"
#include "net/server.h"

namespace bonfire::net {

using nlohmann::json;

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

template <class T>
T field(const json& body, const char* name, T fallback, bool integral = false) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  const json& v = body[name];
  if (!v.is_number() || (integral && !v.is_number_integer()))
    throw Error(ErrorCode::BadGraph, std::string("\"") + name + "\" must be " + (integral ? "an integer" : "a number"));
  return v.get<T>();
}

std::string sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

// Counts a generation as active while it runs.
struct Active {
  std::atomic<int>& n;
  explicit Active(std::atomic<int>& c) : n(c) { ++n; }
  ~Active() { --n; }
};

}  // namespace

void Server::generate(const HttpRequest& req, HttpResponder& res) {
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::BadGraph, std::string("malformed JSON: ") + e.what());
  }
  if (!body.is_object()) throw Error(ErrorCode::BadGraph, "the request must be a JSON object");
  if (body.contains("model") && !body["model"].is_string()) throw Error(ErrorCode::BadGraph, "\"model\" must be a string");
  ServedModel* model = model_for(body.value("model", std::string()));
  ir::GenerateRequest g;
  if (body.contains("tokens")) {
    if (!body["tokens"].is_array()) throw Error(ErrorCode::BadGraph, "\"tokens\" must be a list of token ids");
    for (const auto& t : body["tokens"]) {
      if (!t.is_number_integer()) throw Error(ErrorCode::BadGraph, "\"tokens\" must hold integer token ids");
      g.prompt.push_back(t.get<int32_t>());
    }
  } else if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) throw Error(ErrorCode::BadGraph, "\"prompt\" must be a string");
    g.prompt = model->local().encode_prompt(body["prompt"].get<std::string>());
  } else {
    throw Error(ErrorCode::BadGraph, "give a \"prompt\" (text) or \"tokens\" (ids)");
  }
  g.max_tokens = field<int64_t>(body, "maxTokens", 64, true);
  if (g.max_tokens < 0) throw Error(ErrorCode::BadGraph, "\"maxTokens\" must not be negative");
  if (g.max_tokens > options_.max_tokens)
    throw Error(ErrorCode::TooLarge, "\"maxTokens\" " + std::to_string(g.max_tokens) + " is over this coordinator's limit of " +
                                         std::to_string(options_.max_tokens));
  g.sampling.temperature = field<double>(body, "temperature", 0);
  g.sampling.top_k = field<int64_t>(body, "topK", 0, true);
  g.sampling.top_p = field<double>(body, "topP", 1);
  g.sampling.seed = field<double>(body, "seed", 0);
  g.sampling.repetition_penalty = field<double>(body, "repetitionPenalty", 1);
  g.sampling.presence_penalty = field<double>(body, "presencePenalty", 0);
  g.sampling.penalty_window = field<int64_t>(body, "penaltyWindow", 64, true);
  if (body.contains("stop")) {
    const json& s = body["stop"];
    if (s.is_string()) g.stop.push_back(s);
    else if (s.is_array())
      for (const auto& x : s) {
        if (!x.is_string()) throw Error(ErrorCode::BadGraph, "\"stop\" must be a string or a list of strings");
        g.stop.push_back(x);
      }
    else throw Error(ErrorCode::BadGraph, "\"stop\" must be a string or a list of strings");
  }
  const bool stream = body.value("stream", false);

  Active active(active_generations_);
  GenerationTrace trace;
  LiveScope live(*this, model->id(), static_cast<int64_t>(g.prompt.size()));
  metrics_.add_tokens("prompt", static_cast<int64_t>(g.prompt.size()));
  auto finish = [&](ir::GenerateResult& r) {
    metrics_.add_tokens("generated", static_cast<int64_t>(r.tokens.size()));
    if (trace.first_token_ms > 0) metrics_.observe_ttft_seconds(trace.first_token_ms / 1000);
    json out = r.to_json(model->id());
    out["workers"] = trace.stage_workers;
    out["failovers"] = trace.failovers;
    return out;
  };
  // Every token is counted as it comes (GET /api/v3/stats), streamed or not.
  auto count_token = [&](int32_t, const std::string&) {
    live.token(trace);
    return true;
  };
  if (!stream) {
    ir::GenerateResult r = model->generate(*net_, g, count_token, &trace);
    return res.send_json(200, finish(r));
  }
  // Errors found before the first token still get a plain error response.
  bool started = false;
  // The loop holds back text that may still change (an incomplete UTF-8
  // sequence, a possible stop string's start) and adds it to the result's
  // text only at the end, after the last token's callback. The event of the
  // token that reaches the length limit is therefore sent after the loop,
  // with that tail, so the events' texts add up to the final text. (After an
  // eos there is no token left to carry a tail: the done event's text is
  // the whole text.)
  const int64_t last = std::min<int64_t>(g.max_tokens, model->local().ctx() - static_cast<int64_t>(g.prompt.size()));
  int64_t count = 0;
  std::string streamed;
  std::optional<json> held;
  try {
    ir::GenerateResult r = model->generate(
        *net_, g,
        [&](int32_t id, const std::string& text) {
          live.token(trace);
          if (!started) started = res.start_stream("text/event-stream");
          streamed += text;
          if (++count == last) {
            held = json{{"token", id}, {"text", text}};
            return started && !res.client_gone();
          }
          return started && res.write(sse({{"token", id}, {"text", text}}));
        },
        &trace);
    if (!started && !res.start_stream("text/event-stream")) return;
    if (held) {
      if (r.text.size() > streamed.size() && r.text.compare(0, streamed.size(), streamed) == 0)
        (*held)["text"] = held->at("text").get<std::string>() + r.text.substr(streamed.size());
      res.write(sse(*held));
    }
    json done = finish(r);
    done["done"] = true;
    res.write(sse(done));
    res.end_stream();
  } catch (const Error& e) {
    if (!started) throw;
    res.write(sse(error_to_json(e)));
    res.end_stream();
  }
}

void Server::openai(const HttpRequest& req, HttpResponder& res, bool chat) {
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::BadGraph, std::string("malformed JSON: ") + e.what());
  }
  if (!body.is_object()) throw Error(ErrorCode::BadGraph, "the request must be a JSON object");
  ServedModel* model = nullptr;
  OpenAiCall call = parse_openai_request(body, chat, [&](const json& messages) {
    model = model_for(body.value("model", std::string()));
    return model->apply_chat_template(messages);
  });
  // Clients always send a model name; with one model served, any name maps to it.
  if (!model) {
    try {
      model = model_for(call.model);
    } catch (const Error&) {
      if (models_.size() != 1) throw;
      model = models_[0].get();
    }
  }
  ir::GenerateRequest& g = call.request;
  if (!call.prompt_is_tokens)
    g.prompt = call.add_special ? model->local().encode_prompt(call.prompt)
                                : model->local().tokenizer().encode(call.prompt, false);
  g.max_tokens = std::min<int64_t>(g.max_tokens, options_.max_tokens);
  const std::string id = openai_id(chat);
  const int64_t created = static_cast<int64_t>(unix_now());
  Active active(active_generations_);
  GenerationTrace trace;
  LiveScope live(*this, model->id(), static_cast<int64_t>(g.prompt.size()));
  metrics_.add_tokens("prompt", static_cast<int64_t>(g.prompt.size()));
  if (!call.stream) {
    ir::GenerateResult r = model->generate(
        *net_, g,
        [&](int32_t, const std::string&) {
          live.token(trace);
          return true;
        },
        &trace);
    metrics_.add_tokens("generated", static_cast<int64_t>(r.tokens.size()));
    if (trace.first_token_ms > 0) metrics_.observe_ttft_seconds(trace.first_token_ms / 1000);
    return res.send_json(200, openai_response(call, r, model->id(), id, created));
  }
  bool started = false, first = true;
  std::string streamed;  // see generate(): the loop's text may end with a tail no token carried
  try {
    ir::GenerateResult r = model->generate(
        *net_, g,
        [&](int32_t, const std::string& text) {
          live.token(trace);
          if (!started) started = res.start_stream("text/event-stream");
          if (!started) return false;
          if (text.empty() && !first) return !res.client_gone();
          streamed += text;
          const bool ok = res.write(sse(openai_chunk(call, text, model->id(), id, created, first, "")));
          first = false;
          return ok;
        },
        &trace);
    metrics_.add_tokens("generated", static_cast<int64_t>(r.tokens.size()));
    if (trace.first_token_ms > 0) metrics_.observe_ttft_seconds(trace.first_token_ms / 1000);
    if (!started && !res.start_stream("text/event-stream")) return;
    if (r.text.size() > streamed.size() && r.text.compare(0, streamed.size(), streamed) == 0) {
      res.write(sse(openai_chunk(call, r.text.substr(streamed.size()), model->id(), id, created, first, "")));
      first = false;
    }
    res.write(sse(openai_chunk(call, "", model->id(), id, created, first, r.finish_reason)));
    if (call.include_usage) res.write(sse(openai_usage_chunk(call, r, model->id(), id, created)));
    res.write("data: [DONE]\n\n");
    res.end_stream();
  } catch (const Error& e) {
    if (!started) throw;
    res.write(sse(openai_error(e)));
    res.end_stream();
  }
}

}  // namespace bonfire::net
