#include "net/dial.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <filesystem>

#include "core/json_parse.h"
#include "core/progress.h"

namespace bonfire::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using Kind = DialError::Kind;

namespace {

constexpr auto kStepTimeout = std::chrono::seconds(10);  // connect, TLS handshake, WebSocket upgrade

asio::ip::tcp::resolver::results_type resolve(asio::io_context& io, const Url& url) {
  asio::ip::tcp::resolver resolver(io);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) throw DialError(Kind::Unreachable, "cannot resolve " + url.host + ": " + ec.message());
  return endpoints;
}

void connect(asio::io_context& io, beast::tcp_stream& s, const Url& url) {
  const auto endpoints = resolve(io, url);
  s.expires_after(kStepTimeout);
  const auto ec = run_io(io, [&](auto h) { s.async_connect(endpoints, h); });
  if (ec)
    throw DialError(Kind::Unreachable, "cannot connect to " + url.base() + ": " +
                                           (ec == beast::error::timeout ? "no answer within 10 s" : ec.message()));
}

void handshake(asio::io_context& io, TlsStream& s, const Url& url, const TlsClient& tls) {
  tls.prepare(s, url.host);
  beast::get_lowest_layer(s).expires_after(kStepTimeout);
  const auto ec = run_io(io, [&](auto h) { s.async_handshake(asio::ssl::stream_base::client, h); });
  if (!ec) return;
  const auto failure = tls.explain(ec, s, url.host, url.base());
  throw DialError(failure.refusal ? Kind::Refused : Kind::Failed, failure.message);
}

// The server's reason for declining, from its JSON error body when it has one.
std::string declined_reason(const websocket::response_type& res) {
  std::string why = "HTTP " + std::to_string(res.result_int());
  try {
    const auto j = parse_json(res.body(), "the coordinator's answer", {8, 64 << 10});
    if (j.is_object() && j.contains("error") && j["error"].is_string())
      why += ": " + bounded_text(j["error"].get<std::string>(), 300);
  } catch (const Error&) {
  }
  return why;
}

template <class Ws>
void upgrade(asio::io_context& io, Ws& ws, const Url& url) {
  beast::get_lowest_layer(ws).expires_after(kStepTimeout);
  websocket::response_type res;
  const auto ec = run_io(io, [&](auto h) { ws.async_handshake(res, url.host + ":" + url.port, url.path, h); });
  if (!ec) return;
  const std::string what = "the coordinator at " + url.base() + " did not accept a WebSocket at " + url.path + ": ";
  if (ec != websocket::error::upgrade_declined) throw DialError(Kind::Failed, what + ec.message());
  // 400 and 404 come from a wrong URL (plain HTTP to a TLS port, a path
  // with no WebSocket): every retry would get the same. A 503 (too many
  // connections) may pass.
  const int status = res.result_int();
  throw DialError(status == 400 || status == 404 ? Kind::Refused : Kind::Failed, what + declined_reason(res));
}

// The download itself, over a connected (and, for TLS, handshaken) stream.
template <class Stream>
void fetch(asio::io_context& ioc, Stream& stream, const Url& server, const std::string& path, const std::string& file,
           const std::string& part, int64_t max_bytes, const std::string& bearer, double stall_s) {
  const auto stall = std::chrono::milliseconds(static_cast<int64_t>(stall_s * 1000));
  auto timed = [&](beast::error_code ec, const char* what) {
    if (ec == beast::error::timeout)
      throw Error(ErrorCode::Timeout, "download of " + path + ": " + what + " took over " +
                                          std::to_string(static_cast<int>(stall_s)) + " s");
    return ec;
  };
  auto& tcp = beast::get_lowest_layer(stream);
  http::request<http::empty_body> req{http::verb::get, path, 11};
  req.set(http::field::host, server.host);
  if (!bearer.empty()) req.set(http::field::authorization, "Bearer " + bearer);
  tcp.expires_after(stall);
  auto ec = timed(run_io(ioc, [&](auto h) { http::async_write(stream, req, h); }), "sending the request");
  if (ec) throw Error(ErrorCode::Internal, "download of " + path + " failed: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::file_body> parser;
  parser.body_limit(static_cast<uint64_t>(max_bytes));
  parser.get().body().open(part.c_str(), beast::file_mode::write, ec);
  if (ec) throw Error(ErrorCode::Internal, "cannot write " + part + ": " + ec.message());
  tcp.expires_after(stall);
  ec = timed(run_io(ioc, [&](auto h) { http::async_read_header(stream, buffer, parser, h); }), "the answer");
  if (!ec) {
    const auto length = parser.content_length();
    Progress progress("fetching " + std::filesystem::path(file).filename().string(),
                      length ? static_cast<int64_t>(*length) : 0, Progress::Unit::Bytes);
    while (!ec && !parser.is_done()) {
      tcp.expires_after(stall);  // a deadline per read: slow is fine, stalled is not
      ec = timed(run_io(ioc, [&](auto h) { http::async_read_some(stream, buffer, parser, h); }), "a read");
      if (length && parser.content_length_remaining())
        progress.set(static_cast<int64_t>(*length - *parser.content_length_remaining()));
    }
  }
  if (ec) throw Error(ErrorCode::Internal, "download of " + path + " failed: " + ec.message());
  if (parser.get().result() != http::status::ok)
    throw Error(ErrorCode::Internal, "download of " + path + ": HTTP " + std::to_string(parser.get().result_int()));
  parser.get().body().close();
  std::filesystem::rename(part, file);
}

}  // namespace

LinkStream dial_link(asio::io_context& io, const Url& url, const TlsClient* tls) {
  if (!url.tls) {
    WsStream ws(io);
    connect(io, beast::get_lowest_layer(ws), url);
    upgrade(io, ws, url);
    return LinkStream(std::in_place_type<WsStream>, std::move(ws));
  }
  if (!tls) throw Error(ErrorCode::Internal, url.base() + ": no TLS settings to reach it with");
  WssStream ws(io, tls->context());
  connect(io, beast::get_lowest_layer(ws), url);
  handshake(io, ws.next_layer(), url, *tls);
  upgrade(io, ws, url);
  return LinkStream(std::in_place_type<WssStream>, std::move(ws));
}

void http_download(const Url& server, const TlsClient* tls, const std::string& path, const std::string& file,
                   int64_t max_bytes, const std::string& bearer, double stall_s) {
  const std::string part = file + ".part";
  try {
    asio::io_context ioc;
    if (server.tls) {
      if (!tls) throw Error(ErrorCode::Internal, server.base() + ": no TLS settings to reach it with");
      TlsStream stream(ioc, tls->context());
      connect(ioc, beast::get_lowest_layer(stream), server);
      handshake(ioc, stream, server, *tls);
      fetch(ioc, stream, server, path, file, part, max_bytes, bearer, stall_s);
    } else {
      beast::tcp_stream stream(ioc);
      connect(ioc, stream, server);
      fetch(ioc, stream, server, path, file, part, max_bytes, bearer, stall_s);
    }
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(part, ec);  // never leave a partial file behind
    throw;
  }
}

}  // namespace bonfire::net
