#include "net/request_fields.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

namespace bonfire::net::fields {

void fail(const std::string& field, const std::string& message) { throw Error(ErrorCode::BadGraph, message, field); }

const json* find(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> as_int64(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= -0x1p63 && d < 0x1p63) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

double number_in(const json& body, const char* name, double lo, double hi, double fallback) {
  const json* v = find(body, name);
  if (!v) return fallback;
  const double d = v->is_number() ? v->get<double>() : NAN;
  if (!(d >= lo && d <= hi)) {
    char range[64];
    std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
    fail(name, std::string(name) + " must be a number in " + range);
  }
  return d;
}

int64_t integer_in(const json& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const json* v = find(body, name);
  if (!v) return fallback;
  const auto n = as_int64(*v);
  if (!n || *n < lo || *n > hi)
    fail(name, std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return *n;
}

bool boolean(const json& body, const char* name, bool fallback) {
  const json* v = find(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(name, std::string(name) + " must be true or false");
  return v->get<bool>();
}

double seed(const json& body, const char* name, std::optional<double> fallback) {
  const json* v = find(body, name);
  if (!v) {
    if (fallback) return *fallback;
    // 53 bits, so the double holds the seed exactly.
    thread_local std::mt19937_64 rng{(static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()};
    return static_cast<double>(rng() >> 11);
  }
  double d = NAN;
  if (v->is_number_unsigned())
    d = static_cast<double>(v->get<uint64_t>());
  else if (v->is_number_integer())
    d = static_cast<double>(v->get<int64_t>());
  else if (v->is_number_float())
    d = v->get<double>();
  if (!(std::isfinite(d) && d == std::floor(d) && d >= -0x1p63 && d < 0x1p64))
    fail(name, std::string(name) + " must be an integer in [-2^63, 2^64)");
  return d;
}

std::optional<std::vector<int32_t>> token_list(const json& v, const std::string& path, int64_t vocab) {
  if (!v.is_array() || v.empty() || !v[0].is_number()) return std::nullopt;
  const int64_t end = vocab > 0 ? vocab : int64_t(std::numeric_limits<int32_t>::max()) + 1;
  const std::string range = vocab > 0 ? "[0, " + std::to_string(vocab) + "): this model's vocabulary" : "[0, 2^31)";
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    auto id = as_int64(v[i]);
    if (!id || *id < 0 || *id >= end)
      fail(path, path + "[" + std::to_string(i) + "] must be a token id (an integer in " + range + ")");
    ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

GenerateBody parse_generate_body(const json& body, int64_t vocab) {
  if (!body.is_object()) fail("", "the request must be a JSON object");
  GenerateBody out;
  if (const json* m = find(body, "model")) {
    if (!m->is_string()) fail("model", "model must be a string");
    out.model = m->get<std::string>();
  }
  if (find(body, "tokens") && find(body, "prompt")) fail("tokens", "give \"prompt\" or \"tokens\", not both");
  if (const json* t = find(body, "tokens")) {
    auto ids = token_list(*t, "tokens", vocab);
    if (!ids) fail("tokens", "tokens must be a non-empty list of token ids");
    out.request.prompt = std::move(*ids);
  } else if (const json* p = find(body, "prompt")) {
    if (!p->is_string()) fail("prompt", "prompt must be a string");
    out.prompt = p->get<std::string>();
  } else {
    fail("prompt", "give a \"prompt\" (text) or \"tokens\" (ids)");
  }
  ir::GenerateRequest& g = out.request;
  g.max_tokens = integer_in(body, "maxTokens", 0, std::numeric_limits<int32_t>::max(), 64);
  ir::SamplingParams& s = g.sampling;
  s.temperature = number_in(body, "temperature", 0, 2, 0);
  s.top_k = integer_in(body, "topK", 0, std::numeric_limits<int32_t>::max(), 0);
  s.set_top_p(number_in(body, "topP", 0, 1, 1));
  s.seed = seed(body, "seed", 0.0);
  if (const json* r = find(body, "repetitionPenalty")) {
    s.repetition_penalty = r->is_number() ? r->get<double>() : NAN;
    if (!(s.repetition_penalty > 0 && std::isfinite(s.repetition_penalty)))
      fail("repetitionPenalty", "repetitionPenalty must be a finite number > 0 (1 = off)");
  }
  s.presence_penalty = number_in(body, "presencePenalty", -2, 2, 0);
  s.penalty_window = integer_in(body, "penaltyWindow", 0, 1 << 20, 64);
  if (const json* v = find(body, "stop")) {
    const char* shape = "stop must be a string or a list of at most 16 strings";
    if (v->is_string()) {
      g.stop.push_back(v->get<std::string>());
    } else if (v->is_array() && v->size() <= 16) {
      for (size_t i = 0; i < v->size(); ++i) {
        if (!(*v)[i].is_string()) fail("stop[" + std::to_string(i) + "]", shape);
        g.stop.push_back((*v)[i].get<std::string>());
      }
    } else {
      fail("stop", shape);
    }
  }
  out.stream = boolean(body, "stream", false);
  out.verify = boolean(body, "verify", false);
  return out;
}

}  // namespace bonfire::net::fields
