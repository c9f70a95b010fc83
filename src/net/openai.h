// The OpenAI-compatible API (/v1/completions, /v1/chat/completions,
// /v1/models) as pure translation: a request body becomes an ir::GenerateRequest
// plus the text to tokenize, and a GenerateResult (or one streamed piece)
// becomes the JSON OpenAI's API returns. No sockets here: the HTTP server
// calls these and owns the transport.
//
// What is accepted, and how it maps onto bonfire's sampler:
// - model: echoed back only through the caller's model_id ("" if absent).
// - prompt (completions): a string, a list of one string, a list of token ids
//   or a list of one such list. Several prompts in one request are refused.
// - messages (chat): [{role, content}], content a string or a list of
//   {type: "text", text} parts joined with "\n" (as llama.cpp's server and
//   vLLM flatten them for string templates). Any other part type is refused.
//   role "developer" is passed to the template as "system": that is what it
//   means to OpenAI, and no open model's template knows the name.
// - max_tokens / max_completion_tokens: either (both only if equal); absent:
//   kOpenAiDefaultMaxTokens, which generation cuts to what the context holds.
// - temperature [0, 2] (default 1, OpenAI's; a server wanting the model's
//   generation_config defaults fills absent fields in before parsing),
//   top_p [0, 1] (0 keeps only the most likely token, so
//   it becomes top_k 1: bonfire's sampler takes top_p in (0, 1]), top_k
//   (llama.cpp extension; 0 or less is off, as there and in vLLM's -1).
// - seed: an integer in [-2^63, 2^64). Absent, a random one is drawn per
//   request, since OpenAI clients expect a fresh sample from each call with
//   temperature > 0; once drawn it keys every step, so failover still
//   reproduces the same tokens.
// - stop: a string or a list of up to 4; empty strings are dropped (they can
//   never end the text, and generation ignores them too).
// - presence_penalty [-2, 2]: bonfire's presencePenalty, a flat subtraction
//   for each distinct token in the last penalty_window (64) positions, prompt
//   included; that is llama.cpp's server (penalty_last_n 64), not OpenAI's
//   "every token generated so far".
// - frequency_penalty [-2, 2]: only 0. OpenAI subtracts it once per
//   occurrence; bonfire's sampler sees distinct ids only, so any mapping
//   would penalise a token seen five times as if seen once, a different
//   distribution the client cannot see. Non-zero values are refused with a
//   message naming presence_penalty and repetition_penalty instead.
// - repetition_penalty (llama.cpp/vLLM extension): bonfire's, > 0, 1 = off.
// - stream, stream_options.include_usage (ignored without stream: the
//   non-streamed response always carries usage).
// - n (1 only), best_of (1 only), logprobs (false only: completions'
//   logprobs 0 still asks for the sampled tokens'), top_logprobs (0), echo
//   (false only), suffix (empty only), logit_bias (empty only), tools /
//   functions (empty only), response_format ({"type": "text"} only): a
//   request asking for more than bonfire does is refused, never half-served.
// - add_special_tokens (vLLM extension): overrides add_special.
// - user and unknown fields are ignored, as OpenAI clients send extras.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/generation.h"

namespace bonfire::net {

inline constexpr int64_t kOpenAiDefaultMaxTokens = 256;

struct OpenAiCall {
  bool chat = false;  // /v1/chat/completions (else /v1/completions)
  bool stream = false;
  bool verify = false;  // bonfire's "verify": every step checked on another worker
  bool include_usage = false;  // stream_options.include_usage
  std::string model;           // as the client sent it ("" if absent)
  std::string prompt;          // completions: the prompt; chat: the rendered template
  // max_tokens, sampling, stop. request.prompt (ids) is left empty, and the
  // caller tokenizes `prompt`, unless prompt_is_tokens.
  ir::GenerateRequest request;
  // The client sent token ids: request.prompt holds them, used as given (no
  // BOS added, as `bonfire generate --tokens`); `prompt` is empty.
  bool prompt_is_tokens = false;
  // Tokenize `prompt` with the special tokens the tokenizer's post-processor
  // adds (Tokenizer::encode's add_special). True for completions, as HF's
  // encode(text) and llama.cpp's server do. False for chat: the template
  // writes its own BOS as text (which encode matches as the special token),
  // so adding one would double it; HF's apply_chat_template(tokenize=True)
  // and vLLM's chat endpoint encode with add_special_tokens=False too.
  bool add_special = true;
};

// Parses a request body. `apply_template(messages)` renders the chat messages
// (the model's template, with the generation prompt) and throws when the
// model has none; it receives [{role, content}] with content a string.
// Errors are bonfire::Error(ErrorCode::BadGraph) whose message names the
// field, with the field's path in Error::node ("messages[1].content") so
// openai_error can report it as OpenAI's `param`.
OpenAiCall parse_openai_request(const nlohmann::json& body, bool chat,
                                const std::function<std::string(const nlohmann::json& messages)>& apply_template);

// "stop" for bonfire's "eos" and "stop", "length" for "length"; anything
// else ("cancelled") passes through.
std::string openai_finish_reason(const std::string& bonfire_reason);

// A fresh response id: "chatcmpl-" or "cmpl-" and 24 random letters/digits.
std::string openai_id(bool chat);

// The non-streamed response ("text_completion" or "chat.completion") with
// choices[0] (text, or message {role: "assistant", content}), logprobs null,
// finish_reason, and usage {prompt_tokens, completion_tokens, total_tokens}.
nlohmann::json openai_response(const OpenAiCall& call, const ir::GenerateResult& result, const std::string& model_id,
                               const std::string& id, int64_t created);

// One streamed chunk ("text_completion" or "chat.completion.chunk"). For chat
// the first chunk's delta carries role "assistant"; the delta has no content
// when `piece` is empty on a finishing chunk (OpenAI's last chunk is
// delta {}). finish_reason is null unless `finish` is set ("" for none;
// bonfire's or OpenAI's reason). With include_usage every chunk has
// "usage": null, as OpenAI writes them.
nlohmann::json openai_chunk(const OpenAiCall& call, const std::string& piece, const std::string& model_id,
                            const std::string& id, int64_t created, bool first, const std::string& finish);

// The chunk sent before [DONE] when include_usage: choices [] and usage.
nlohmann::json openai_usage_chunk(const OpenAiCall& call, const ir::GenerateResult& result, const std::string& model_id,
                                  const std::string& id, int64_t created);

// {"error": {"message", "type", "param", "code"}} as OpenAI's API writes
// errors: type "invalid_request_error" for codes whose HTTP status is 4xx,
// "server_error" otherwise; param is Error::node (null when empty); code is
// bonfire's code string ("bad_graph", ...). The HTTP status stays
// error_http_status(e.code).
nlohmann::json openai_error(const Error& e);
// The same shape for a refusal that is no Error code (the router's
// "not_found", "method_not_allowed", "unauthorized": all 4xx).
nlohmann::json openai_error(const std::string& message, const std::string& code, int status,
                            const std::string& param = {});

// GET /v1/models: {"object": "list", "data": [{id, object: "model", created,
// owned_by: "bonfire"}]}.
nlohmann::json openai_models(const std::vector<std::string>& ids, int64_t created);
// GET /v1/models/ID: the one entry of that list.
nlohmann::json openai_model(const std::string& id, int64_t created);

}  // namespace bonfire::net
