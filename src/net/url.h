// The coordinator addresses a worker is given: http://host:port[/...] or
// ws://host:port/api/v3/worker, and their TLS forms https:// and wss://.
// Parsing only; reaching the address is dial.h's.
#pragma once
#include <string>

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

}  // namespace bonfire::net
