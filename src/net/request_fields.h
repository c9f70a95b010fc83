// Reading the fields of a client's request body with one set of rules, so
// /api/v3/generate and the OpenAI-compatible /v1/* refuse the same mistakes
// the same way: every refusal is Error(BadGraph) (HTTP 400) whose message
// names the field, with the field's path in Error::node. Explicit nulls
// count as absent, as OpenAI's clients send "temperature": null for "the
// default".
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/generation.h"

namespace bonfire::net::fields {

using nlohmann::json;

[[noreturn]] void fail(const std::string& field, const std::string& message);

// The field, or null when absent or null.
const json* find(const json& body, const char* name);
// 10 and 10.0 alike (JSON has one number type); nullopt when not an integer
// that fits (1e400, 2.5, "3").
std::optional<int64_t> as_int64(const json& v);
double number_in(const json& body, const char* name, double lo, double hi, double fallback);
int64_t integer_in(const json& body, const char* name, int64_t lo, int64_t hi, int64_t fallback);
bool boolean(const json& body, const char* name, bool fallback);
// An integer in [-2^63, 2^64) as the sample op takes it; absent: `fallback`,
// or a fresh random one when `fallback` is nullopt.
double seed(const json& body, const char* name, std::optional<double> fallback);
// A non-empty list of token ids in [0, vocab) (vocab 0: [0, 2^31)), or
// nullopt when `v` is not a list of numbers.
std::optional<std::vector<int32_t>> token_list(const json& v, const std::string& path, int64_t vocab = 0);

// The body of POST /api/v3/generate (spec/PROTOCOL.md).
struct GenerateBody {
  std::string model;
  std::optional<std::string> prompt;  // else request.prompt holds the ids
  ir::GenerateRequest request;
  bool stream = false;
  bool verify = false;  // check every step on another worker before its token goes out
};
GenerateBody parse_generate_body(const json& body, int64_t vocab);

}  // namespace bonfire::net::fields
