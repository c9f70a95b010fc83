// The coordinator addresses a worker is given: http://host:port[/...] or
// ws://host:port/api/v3/worker.
#pragma once
#include <string>

namespace bonfire::net {

struct Url {
  std::string host;
  std::string port;
  std::string path;  // the WebSocket path
  std::string base() const { return "http://" + host + ":" + port; }
};

// Throws Error(BadGraph) naming what is wrong with the URL.
Url parse_join_url(const std::string& url);

// A blocking HTTP GET of base+path into `file` (written to file.part and
// renamed only when complete). At most `max_bytes`; throws Error on failure.
void http_download(const Url& server, const std::string& path, const std::string& file, int64_t max_bytes,
                   const std::string& bearer);

}  // namespace bonfire::net
