// The coordinator addresses a worker is given: http://host:port[/...] or
// ws://host:port/api/v3/worker, and their TLS forms https:// and wss://.
// Parsing only; reaching the address is dial.h's.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace bonfire::net {

struct Url {
  std::string host;
  std::string port;
  std::string path;  // the WebSocket path
  bool tls = false;  // https:// or wss://
  std::string base() const { return (tls ? "https://" : "http://") + host + ":" + port; }
};

// Throws Error(BadGraph) naming what is wrong with the URL.
Url parse_join_url(const std::string& url);

// A URL path or query value with its %XX escapes undone ('+' stays '+');
// nullopt for a malformed escape or an escaped NUL.
std::optional<std::string> percent_decode(std::string_view s);

// `s` as one path segment: every byte but A-Z a-z 0-9 - . _ ~ escaped, so a
// name with '/', '%', spaces or non-ASCII survives the server's decoding.
std::string percent_encode_segment(std::string_view s);

}  // namespace bonfire::net
