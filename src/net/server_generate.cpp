// Generation endpoints: POST /api/v3/generate (PROTOCOL.md) and the
// OpenAI-compatible /v1/completions and /v1/chat/completions, streamed as
// server-sent events or not. A client that disconnects mid-stream cancels
// its generation: the next write fails, the loop stops, the sessions go.
#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "core/json_parse.h"
#include "graph/wire.h"
#include "net/openai.h"
#include "net/request_fields.h"
#include "net/server.h"

namespace bonfire::net {

using nlohmann::json;

namespace {

// The prompt's tokens, refused before tokenizing when its text could not
// fit the context anyway (the tokenizer's working memory grows with the
// text: a 16 MB prompt cost ~940 MB). No vocabulary here has a token over
// 256 bytes of text.
std::vector<int32_t> encode_bounded(const ServedModel& model, const std::string& text, bool add_special) {
  const size_t max_bytes = static_cast<size_t>(std::max<int64_t>(model.local().ctx(), 1)) * 256;
  if (text.size() > max_bytes)
    throw Error(ErrorCode::TooLarge, "the prompt is " + std::to_string(text.size()) + " bytes; the model's context of " +
                                         std::to_string(model.local().ctx()) + " tokens holds at most ~" +
                                         std::to_string(max_bytes), "prompt");
  return add_special ? model.local().encode_prompt(text) : model.local().tokenizer().encode(text, false);
}

std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

// Counts a generation as active while it runs.
struct Active {
  std::atomic<int>& n;
  explicit Active(std::atomic<int>& c) : n(c) { ++n; }
  ~Active() { --n; }
};

}  // namespace

void Server::generate(const HttpRequest& req, HttpResponder& res) {
  const json body = parse_json(req.body, "the request body");
  if (!body.is_object()) throw Error(ErrorCode::BadGraph, "the request must be a JSON object");
  if (body.contains("model") && !body["model"].is_string()) throw Error(ErrorCode::BadGraph, "\"model\" must be a string", "model");
  ServedModel* model = model_for(body.value("model", std::string()));
  fields::GenerateBody parsed = fields::parse_generate_body(body, model->local().ir()["model"]["vocab"].get<int64_t>());
  ir::GenerateRequest& g = parsed.request;
  if (parsed.prompt) g.prompt = encode_bounded(*model, *parsed.prompt, true);
  if (g.max_tokens > options_.max_tokens)
    throw Error(ErrorCode::TooLarge, "maxTokens " + std::to_string(g.max_tokens) + " is over this coordinator's limit of " +
                                         std::to_string(options_.max_tokens), "maxTokens");
  const bool stream = parsed.stream;
  const GenerationChecks checks{verifier_.get(), parsed.verify};

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
    // What the network path adds to each decode step: the decode time less
    // the workers' own time running the steps (docs/PERFORMANCE.md).
    if (trace.decode_steps > 0)
      out["timings"]["overheadMsPerStep"] = (r.decode_ms - trace.decode_worker_ms) / trace.decode_steps;
    if (!trace.verified.is_null()) out["verified"] = trace.verified;
    return out;
  };
  // Every token is counted as it comes (GET /api/v3/stats), streamed or not.
  auto count_token = [&](int32_t, const std::string&) {
    live.token(trace);
    return true;
  };
  if (!stream) {
    ir::GenerateResult r = model->generate(*net_, g, count_token, &trace, checks);
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
        &trace, checks);
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
  const json body = parse_json(req.body, "the request body");
  if (!body.is_object()) throw Error(ErrorCode::BadGraph, "the request must be a JSON object");
  // Clients always send a model name ("gpt-4o" by default in many); with one
  // model served, any name maps to it.
  auto named = [&](const std::string& name) {
    if (models_.size() == 1) return models_[0].get();
    return model_for(name);
  };
  ServedModel* model = nullptr;
  OpenAiCall call = parse_openai_request(body, chat, [&](const json& messages) {
    model = named(body.value("model", std::string()));
    return model->apply_chat_template(messages);
  });
  if (!model) model = named(call.model);
  ir::GenerateRequest& g = call.request;
  if (!call.prompt_is_tokens) g.prompt = encode_bounded(*model, call.prompt, call.add_special);
  const int64_t vocab = model->local().ir()["model"]["vocab"].get<int64_t>();
  for (size_t i = 0; i < g.prompt.size() && call.prompt_is_tokens; ++i)
    if (g.prompt[i] >= vocab)
      throw Error(ErrorCode::BadGraph, "prompt[" + std::to_string(i) + "] is not a token id of this model (vocabulary " +
                                           std::to_string(vocab) + ")", "prompt");
  g.max_tokens = std::min<int64_t>(g.max_tokens, options_.max_tokens);
  const std::string id = openai_id(chat);
  const int64_t created = static_cast<int64_t>(unix_now());
  Active active(active_generations_);
  GenerationTrace trace;
  const GenerationChecks checks{verifier_.get(), call.verify};
  LiveScope live(*this, model->id(), static_cast<int64_t>(g.prompt.size()));
  metrics_.add_tokens("prompt", static_cast<int64_t>(g.prompt.size()));
  if (!call.stream) {
    ir::GenerateResult r = model->generate(
        *net_, g,
        [&](int32_t, const std::string&) {
          live.token(trace);
          return true;
        },
        &trace, checks);
    metrics_.add_tokens("generated", static_cast<int64_t>(r.tokens.size()));
    if (trace.first_token_ms > 0) metrics_.observe_ttft_seconds(trace.first_token_ms / 1000);
    json out = openai_response(call, r, model->id(), id, created);
    if (!trace.verified.is_null()) out["bonfire_verified"] = trace.verified;
    return res.send_json(200, out);
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
        &trace, checks);
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
