// Errors that cross a module boundary. Every refusal the protocol can return is
// an Error with one of PROTOCOL.md's codes, so the HTTP layer and the CLI print
// the same JSON: {"error", "code", "node"?, "feature"?}.
#pragma once
#include <stdexcept>
#include <string>

namespace bonfire {

enum class ErrorCode {
  BadGraph,            // malformed JSON, unknown op/param, wrong arity, shape mismatch...
  UnsupportedFeature,  // no worker implements the named feature
  NoWorker,
  SessionNotFound,
  TooLarge,            // over a documented limit (elements, bytes, nodes)
  Timeout,
  Internal,
};

const char* error_code_name(ErrorCode code);
int error_http_status(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, std::string node = {}, std::string feature = {})
      : std::runtime_error(message), code(code), node(std::move(node)), feature(std::move(feature)) {}
  ErrorCode code;
  std::string node;     // the graph node the error is about, if any
  std::string feature;  // the feature that was missing, if any
};

// `s` cut to at most `max` bytes (at a UTF-8 character boundary, with "..."
// added), for error text that quotes what a sender wrote: an answer never
// echoes an unbounded input.
std::string bounded_text(const std::string& s, size_t max);

// Shorthands for the most common refusal.
[[noreturn]] inline void bad_graph(const std::string& message, const std::string& node = {}) {
  throw Error(ErrorCode::BadGraph, message, node);
}
[[noreturn]] inline void too_large(const std::string& message, const std::string& node = {}) {
  throw Error(ErrorCode::TooLarge, message, node);
}

}  // namespace bonfire
