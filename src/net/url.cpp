#include "net/url.h"

#include <utility>

#include "core/error.h"

namespace bonfire::net {

Url parse_join_url(const std::string& url) {
  std::string rest;
  Url u;
  static const std::pair<std::string, bool> kSchemes[] = {
      {"http://", false}, {"ws://", false}, {"https://", true}, {"wss://", true}};
  bool found = false;
  for (const auto& [scheme, tls] : kSchemes) {
    if (url.rfind(scheme, 0) != 0) continue;
    rest = url.substr(scheme.size());
    u.tls = tls;
    found = true;
    break;
  }
  if (!found)
    throw Error(ErrorCode::BadGraph,
                url + ": expected http://host:port, https://host:port or ws(s)://host:port/api/v3/worker");
  const size_t slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  const size_t colon = hostport.rfind(':');
  u.host = hostport.substr(0, colon);
  u.port = colon == std::string::npos ? (u.tls ? "443" : "80") : hostport.substr(colon + 1);
  if (u.host.empty()) throw Error(ErrorCode::BadGraph, url + ": no host");
  const bool digits = !u.port.empty() && u.port.size() <= 5 && u.port.find_first_not_of("0123456789") == std::string::npos;
  const int port = digits ? std::stoi(u.port) : 0;
  if (port < 1 || port > 65535)
    throw Error(ErrorCode::BadGraph, url + ": the port must be a number from 1 to 65535");
  u.path = path.empty() || path == "/" ? "/api/v3/worker" : path;
  return u;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string percent_encode_segment(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

}  // namespace bonfire::net
