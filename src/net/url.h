// The coordinator addresses a worker is given: http://host:port[/...] or
// ws://host:port/api/v3/worker.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
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
// renamed only when complete). At most `max_bytes`; throws Error on failure,
// or Error(Timeout) when connecting takes over 10 s or no byte arrives for
// `stall_s` seconds.
void http_download(const Url& server, const std::string& path, const std::string& file, int64_t max_bytes,
                   const std::string& bearer, double stall_s = 30);

// Runs one asynchronous operation started by `start(handler)` on `io` to
// completion and returns its error. Blocking Beast calls ignore a stream's
// expires_after; asynchronous ones honour it, so code that wants a deadline
// on a blocking step starts it through this.
template <class Start>
boost::system::error_code run_io(boost::asio::io_context& io, Start&& start) {
  boost::system::error_code ec;
  start([&ec](const boost::system::error_code& e, auto&&...) { ec = e; });
  io.restart();
  io.run();
  return ec;
}

}  // namespace bonfire::net
