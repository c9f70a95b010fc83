#include "net/url.h"

#include "core/progress.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace bonfire::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Url parse_join_url(const std::string& url) {
  std::string rest;
  Url u;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("ws://", 0) == 0) {
    rest = url.substr(5);
  } else if (url.rfind("https://", 0) == 0 || url.rfind("wss://", 0) == 0) {
    throw Error(ErrorCode::BadGraph, url + ": TLS is not supported by this build; put a TLS proxy in front and use http://");
  } else {
    throw Error(ErrorCode::BadGraph, url + ": expected http://host:port or ws://host:port/api/v3/worker");
  }
  const size_t slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  const size_t colon = hostport.rfind(':');
  u.host = hostport.substr(0, colon);
  u.port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  if (u.host.empty()) throw Error(ErrorCode::BadGraph, url + ": no host");
  if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos)
    throw Error(ErrorCode::BadGraph, url + ": the port is not a number");
  u.path = path.empty() || path == "/" ? "/api/v3/worker" : path;
  return u;
}

void http_download(const Url& server, const std::string& path, const std::string& file, int64_t max_bytes,
                   const std::string& bearer, double stall_s) {
  const std::string part = file + ".part";
  const auto stall = std::chrono::milliseconds(static_cast<int64_t>(stall_s * 1000));
  auto timed = [&](beast::error_code ec, const char* what) {
    if (ec == beast::error::timeout)
      throw Error(ErrorCode::Timeout, "download of " + path + ": " + what + " took over " +
                                          std::to_string(static_cast<int>(stall_s)) + " s");
    return ec;
  };
  try {
    asio::io_context ioc;
    asio::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    beast::error_code ec;
    const auto endpoints = resolver.resolve(server.host, server.port, ec);
    if (ec) throw Error(ErrorCode::Internal, "cannot resolve " + server.host + ": " + ec.message());
    stream.expires_after(std::chrono::seconds(10));
    ec = timed(run_io(ioc, [&](auto h) { stream.async_connect(endpoints, h); }), "connecting");
    if (ec) throw Error(ErrorCode::Internal, "cannot connect to " + server.base() + ": " + ec.message());
    http::request<http::empty_body> req{http::verb::get, path, 11};
    req.set(http::field::host, server.host);
    if (!bearer.empty()) req.set(http::field::authorization, "Bearer " + bearer);
    stream.expires_after(stall);
    ec = timed(run_io(ioc, [&](auto h) { http::async_write(stream, req, h); }), "sending the request");
    if (ec) throw Error(ErrorCode::Internal, "download of " + path + " failed: " + ec.message());
    beast::flat_buffer buffer;
    http::response_parser<http::file_body> parser;
    parser.body_limit(static_cast<uint64_t>(max_bytes));
    parser.get().body().open(part.c_str(), beast::file_mode::write, ec);
    if (ec) throw Error(ErrorCode::Internal, "cannot write " + part + ": " + ec.message());
    stream.expires_after(stall);
    ec = timed(run_io(ioc, [&](auto h) { http::async_read_header(stream, buffer, parser, h); }), "the answer");
    if (!ec) {
      const auto length = parser.content_length();
      Progress progress("fetching " + std::filesystem::path(file).filename().string(),
                        length ? static_cast<int64_t>(*length) : 0, Progress::Unit::Bytes);
      while (!ec && !parser.is_done()) {
        stream.expires_after(stall);  // a deadline per read: slow is fine, stalled is not
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
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(part, ec);  // never leave a partial file behind
    throw;
  }
}

}  // namespace bonfire::net
