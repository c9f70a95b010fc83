#include "core/json_parse.h"

#include <cmath>

#include "core/error.h"
#include "core/file.h"

namespace bonfire {

namespace {

template <class Json>
Json parse_bounded(std::string_view text, const std::string& what, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    throw Error(ErrorCode::TooLarge, what + ": " + std::to_string(text.size()) + " bytes of JSON, over the limit of " +
                                         std::to_string(limits.max_bytes));
  // The callback sees each value as it starts, with its depth: refuse before
  // the deep part is built. (The parser itself keeps its stack on the heap.)
  const int max_depth = limits.max_depth;
  std::string last_key;  // to say where a bad value was
  typename Json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t event, Json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && parsed.is_string()) last_key = parsed.template get<std::string>();
    if ((event == nlohmann::json::parse_event_t::object_start ||
         event == nlohmann::json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw Error(ErrorCode::BadGraph,
                  what + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), cb);
  } catch (const nlohmann::json::exception& e) {
    std::string near;
    if (!last_key.empty()) {
      // The key is the sender's text: shown short and printable only.
      std::string k = last_key.substr(0, 64);
      for (char& c : k)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e || c == '"') c = '?';
      near = " (after the key \"" + k + "\")";
    }
    throw Error(ErrorCode::BadGraph, what + ": malformed JSON: " + json_error_text(e) + near);
  }
}

}  // namespace

std::string json_error_text(const std::exception& e) {
  std::string m = e.what();
  if (m.rfind("[json.exception.", 0) == 0) {
    const size_t close = m.find("] ");
    if (close != std::string::npos) m = m.substr(close + 2);
  }
  const size_t echo = m.find("; last read:");
  if (echo != std::string::npos) m = m.substr(0, echo);
  // What is left is nlohmann's own ASCII text; keep it short regardless.
  if (m.size() > 200) m = m.substr(0, 200);
  for (char& c : m)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return m;
}

nlohmann::json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits) {
  return parse_bounded<nlohmann::json>(text, what, limits);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& what, const JsonLimits& limits) {
  return parse_bounded<nlohmann::ordered_json>(text, what, limits);
}

nlohmann::json parse_json_file(const std::string& path, const JsonLimits& limits) {
  return parse_json(read_file(path, limits.max_bytes), path, limits);
}

nlohmann::ordered_json parse_ordered_json_file(const std::string& path, const JsonLimits& limits) {
  return parse_ordered_json(read_file(path, limits.max_bytes), path, limits);
}

std::optional<int64_t> whole_number(const nlohmann::json& v, int64_t limit) {
  if (v.is_number_integer()) {  // int64 or uint64 as parsed: compare without converting
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      return u <= static_cast<uint64_t>(limit) ? std::optional<int64_t>(static_cast<int64_t>(u)) : std::nullopt;
    }
    const int64_t i = v.get<int64_t>();
    return i >= -limit && i <= limit ? std::optional<int64_t>(i) : std::nullopt;
  }
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!(std::fabs(d) <= static_cast<double>(limit)) || d != std::floor(d)) return std::nullopt;  // NaN fails too
  return static_cast<int64_t>(d);
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace bonfire
