// libFuzzer target: HTTP requests as the server reads them. The bytes go to
// boost::beast's request_parser<string_body> with the limits
// net/http_server.cpp sets (header 64 KiB, body HttpServerOptions::max_body,
// 16 MiB by default). When a whole request parses, its body goes through the
// project's bounded JSON parser (core/json_parse.h, depth 64) and, when it is
// an object, through parse_openai_request (net/openai.h) as both a chat and
// a completions request, and through parse_generate_body
// (net/request_fields.h) as a /api/v3/generate request. A parser error, bonfire::Error, is a clean refusal;
// anything else is a bug.
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/json_parse.h"
#include "net/http_server.h"
#include "graph/wire.h"
#include "net/openai.h"
#include "net/request_fields.h"

namespace http = boost::beast::http;

namespace {

const uint64_t kMaxBody = bonfire::net::HttpServer::Options{}.max_body;  // as http_server.cpp: parser.body_limit

void body(const std::string& text) {
  nlohmann::json j;
  try {
    j = bonfire::parse_json(text, "request body");
  } catch (const bonfire::Error&) {
    return;
  }
  (void)bonfire::dump_json(j);
  if (!j.is_object()) return;
  // The chat template is not under test here (chat_template_fuzz is): the
  // messages the parser hands over are written back as JSON.
  const auto apply_template = [](const nlohmann::json& messages) { return bonfire::dump_json(messages); };
  for (bool chat : {true, false}) {
    try {
      const bonfire::net::OpenAiCall call = bonfire::net::parse_openai_request(j, chat, apply_template);
      (void)call;
    } catch (const bonfire::Error& e) {
      (void)bonfire::net::openai_error(e);
    }
  }
  // bonfire's own /api/v3/generate body, by the same field rules (a
  // vocabulary of 32000 for the token-id check).
  try {
    (void)bonfire::net::fields::parse_generate_body(j, 32000);
  } catch (const bonfire::Error& e) {
    (void)bonfire::error_to_json(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  http::request_parser<http::string_body> parser;
  parser.body_limit(kMaxBody);
  parser.header_limit(64 * 1024);
  parser.eager(true);
  boost::system::error_code ec;
  boost::asio::const_buffer in(data, size);
  while (in.size() > 0 && !parser.is_done()) {
    const size_t used = parser.put(in, ec);
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec) return 0;
    if (used == 0) break;
    in += used;
  }
  if (!parser.is_done()) {
    // The connection closed here: only a body that runs to end of stream may end.
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
  }
  const auto& req = parser.get();
  (void)req.method_string();
  (void)std::string(req.target());
  for (const auto& field : req) (void)field.value();
  body(req.body());
  return 0;
}
