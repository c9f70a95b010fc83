// The coordinator's HTTP/1.1 server. One thread per connection doing plain
// blocking reads and writes (simple to follow, and a streamed generation is
// just a loop of writes); a watchdog thread shuts down any socket whose read
// or write outlives its deadline, so a slow or stalled client costs one idle
// thread for at most that long. A WebSocket upgrade on the worker path hands
// the connection to the coordinator and leaves this server.
//
// With a TLS context (serve --tls-cert/--tls-key) every connection is TLS:
// the handshake runs first on the connection's thread, under its own
// deadline (the watchdog again), and a failure costs one log line. A client
// that speaks plain HTTP to the TLS port gets a plain-text 400 saying so.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <variant>

#include "net/tls.h"

namespace bonfire::net {

using HttpRequestRaw = boost::beast::http::request<boost::beast::http::string_body>;
struct Connection;

struct HttpRequest {
  std::string method;
  std::string path;   // without the query, %-escapes decoded
  std::string query;  // after '?', undecoded (query_param decodes)
  std::string body;
  std::string remote;
  const HttpRequestRaw* raw = nullptr;
  std::string header(const std::string& name) const;
  std::string query_param(const std::string& name) const;
};

// How a handler answers: once with send(), or as a stream (chunked).
class HttpResponder {
 public:
  // head_only: a HEAD request, answered with the headers alone.
  HttpResponder(Connection* c, bool keep_alive, bool head_only = false)
      : conn_(c), keep_alive_(keep_alive), head_only_(head_only) {}
  void send(int status, const std::string& body, const std::string& content_type = "application/json",
            const std::map<std::string, std::string>& headers = {});
  void send_json(int status, const nlohmann::json& j);
  // A header every answer of this request carries (CORS's, for one).
  void add_header(const std::string& name, const std::string& value) { always_[name] = value; }
  // Starts a chunked response; false when the client is gone.
  bool start_stream(const std::string& content_type);
  bool write(const std::string& chunk);  // false when the client is gone
  void end_stream();
  bool answered() const { return answered_; }
  bool client_gone() const { return gone_; }
  int status() const { return status_; }
  bool keep_alive() const { return keep_alive_ && !gone_; }

 private:
  Connection* conn_;
  bool keep_alive_;
  bool head_only_;
  bool answered_ = false;
  bool streaming_ = false;
  bool gone_ = false;
  int status_ = 0;
  std::map<std::string, std::string> always_;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;
// A connection's stream: plain, or TLS with its handshake done. Its
// executor is a strand of the server's io_context, its own.
using ServerStream = std::variant<boost::beast::tcp_stream, TlsStream>;
// Takes over a connection that asked for a WebSocket at `path`. `slot` is
// the connection's place in the server's counts: hold it as long as the
// stream lives, so upgraded connections count against the limits too.
using UpgradeHandler = std::function<void(ServerStream, HttpRequestRaw, std::shared_ptr<void> slot)>;
struct ConnectionCounts;

class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8080;                      // 0: any free port (see port())
    uint64_t max_body = 16u << 20;        // bytes; more is 413
    int max_connections = 512;            // more get 503 (upgraded ones included)
    int max_per_address = 128;            // from one client address; more get 503
    double read_timeout_s = 30;           // to receive one whole request
    double write_timeout_s = 30;          // to send one write
    double keep_alive_s = 30;             // idle between requests
    std::string upgrade_path = "/api/v3/worker";
    double tls_handshake_s = 10;          // (and at most read_timeout_s)
    std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain HTTP
    std::function<void(const std::string&)> log;      // a failed TLS handshake's line
    // Answers a request refused before the handler runs (malformed, a body
    // over max_body, a bad %-escape, a TLS hello on a plain port), given
    // what was read of it (path undecoded, "" before the request line;
    // headers; no body), status, error code and sentence. Null: {"error",
    // "code"} as PROTOCOL.md writes errors.
    std::function<void(const HttpRequest& partial, int status, const std::string& code, const std::string& why,
                       HttpResponder&)>
        refuse;
  };
  // Binds at once (throws Error when the port is taken); serves after start().
  HttpServer(boost::asio::io_context& ioc, const Options& options, HttpHandler handler, UpgradeHandler upgrade);
  ~HttpServer();
  int port() const { return port_; }
  void start();
  void stop();

 private:
  void accept_loop();
  void serve(std::shared_ptr<Connection> c, std::shared_ptr<void> slot);
  bool tls_handshake(Connection& c, const std::string& remote);
  void log(const std::string& s) const {
    if (options_.log) options_.log(s);
  }
  void watchdog();

  boost::asio::io_context& ioc_;
  Options options_;
  HttpHandler handler_;
  UpgradeHandler upgrade_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::shared_ptr<ConnectionCounts> counts_;
  std::mutex mu_;
  std::map<Connection*, std::weak_ptr<Connection>> live_;
  std::condition_variable idle_;  // live_ became empty
  std::thread accept_thread_, watchdog_thread_;
};

}  // namespace bonfire::net
