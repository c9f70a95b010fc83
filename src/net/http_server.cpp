#include "net/http_server.h"

#include <sys/socket.h>

#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <algorithm>
#include <array>
#include <chrono>

#include "core/error.h"
#include "core/json_parse.h"
#include "net/url.h"

namespace bonfire::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Open connections, in all and per client address. Shared with the slots
// that upgraded connections carry away, which may outlive the server.
struct ConnectionCounts {
  std::mutex mu;
  int open = 0;
  std::map<std::string, int> per_address;
};

namespace {

// A connection's place in the counts, given back when the last holder lets go.
struct Slot {
  std::shared_ptr<ConnectionCounts> counts;
  std::string address;
  ~Slot() {
    std::lock_guard<std::mutex> lock(counts->mu);
    --counts->open;
    if (--counts->per_address[address] <= 0) counts->per_address.erase(address);
  }
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

// One client connection. The watchdog may shut the socket down (never close
// it) from its own thread; the mutex keeps that away from a close or a move.
struct Connection {
  Connection(beast::tcp_stream s, asio::ssl::context* tls)
      : stream(tls ? ServerStream(std::in_place_type<TlsStream>, std::move(s), *tls)
                   : ServerStream(std::in_place_type<beast::tcp_stream>, std::move(s))) {}
  ServerStream stream;
  std::mutex mu;
  bool detached = false;  // closed, or handed to the WebSocket side
  std::atomic<int64_t> deadline{0};  // steady ms; 0: none
  std::atomic<bool> expired{false};  // the watchdog shut it down
  double write_timeout_s = 30;
  bool tls() const { return std::holds_alternative<TlsStream>(stream); }
  tcp::socket& socket() {
    return std::visit([](auto& s) -> tcp::socket& { return beast::get_lowest_layer(s).socket(); }, stream);
  }
  // Runs f(stream) with this connection's stream, plain or TLS.
  template <class F>
  void io(F&& f) {
    std::visit(std::forward<F>(f), stream);
  }
  void expire_in(double s) { deadline = now_ms() + static_cast<int64_t>(s * 1000); }
  void no_deadline() { deadline = 0; }
  void shutdown_if_late(int64_t now) {
    const int64_t d = deadline;
    if (d == 0 || now < d) return;
    std::lock_guard<std::mutex> lock(mu);
    if (detached) return;
    expired = true;
    ::shutdown(socket().native_handle(), SHUT_RDWR);
  }
  // Without a TLS close_notify: every response is framed by its length or
  // its chunks, so a cut cannot pass for the end of one.
  void close() {
    std::lock_guard<std::mutex> lock(mu);
    if (detached) return;
    detached = true;
    beast::error_code ec;
    socket().shutdown(tcp::socket::shutdown_both, ec);
    socket().close(ec);
  }
  // After an answer to a request that was not read to its end (a body over
  // the limit): closing with unread bytes makes the kernel send a reset,
  // which can reach the client before it reads the answer. Stop writing,
  // then read and drop what arrives for a short while (a bounded lingering
  // close).
  void linger() {
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    expire_in(2);
    std::array<char, 64 * 1024> sink;
    for (size_t dropped = 0; dropped < (64u << 20);) {
      const size_t n = socket().read_some(asio::buffer(sink), ignored);
      if (ignored || n == 0) break;
      dropped += n;
    }
    no_deadline();
  }
  template <class Buffers>
  bool write(const Buffers& b) {
    expire_in(write_timeout_s);
    beast::error_code ec;
    io([&](auto& s) { asio::write(s, b, ec); });
    no_deadline();
    return !ec;
  }
};

std::string HttpRequest::header(const std::string& name) const {
  if (!raw) return {};
  auto it = raw->find(name);
  return it == raw->end() ? std::string() : std::string(it->value());
}

std::string HttpRequest::query_param(const std::string& name) const {
  size_t i = 0;
  while (i <= query.size()) {
    size_t amp = query.find('&', i);
    if (amp == std::string::npos) amp = query.size();
    const std::string kv = query.substr(i, amp - i);
    const size_t eq = kv.find('=');
    if (percent_decode(kv.substr(0, eq)) == name)
      return eq == std::string::npos ? "" : percent_decode(kv.substr(eq + 1)).value_or("");
    i = amp + 1;
  }
  return {};
}

void HttpResponder::send_json(int status, const nlohmann::json& j) { send(status, dump_json(j) + "\n"); }

void HttpResponder::send(int status, const std::string& body, const std::string& content_type,
                         const std::map<std::string, std::string>& headers) {
  if (answered_) return;
  answered_ = true;
  status_ = status;
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::server, "bonfire");
  res.set(http::field::content_type, content_type);
  for (const auto& [k, v] : always_) res.set(k, v);
  for (const auto& [k, v] : headers) res.set(k, v);
  res.keep_alive(keep_alive_);
  res.body() = body;
  res.prepare_payload();
  conn_->expire_in(conn_->write_timeout_s);
  beast::error_code ec;
  if (head_only_) {  // a GET's headers, Content-Length included, and no body
    http::response<http::empty_body> head{std::move(res.base())};
    http::serializer<false, http::empty_body> sr{head};
    conn_->io([&](auto& s) { http::write(s, sr, ec); });
  } else {
    http::serializer<false, http::string_body> sr{res};
    conn_->io([&](auto& s) { http::write(s, sr, ec); });
  }
  conn_->no_deadline();
  if (ec) gone_ = true;
}

bool HttpResponder::start_stream(const std::string& content_type) {
  if (answered_) return false;
  answered_ = streaming_ = true;
  status_ = 200;
  http::response<http::empty_body> res{http::status::ok, 11};
  res.set(http::field::server, "bonfire");
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-cache");
  for (const auto& [k, v] : always_) res.set(k, v);
  res.chunked(!head_only_);
  res.keep_alive(keep_alive_ && !head_only_);
  http::response_serializer<http::empty_body> sr{res};
  conn_->expire_in(conn_->write_timeout_s);
  beast::error_code ec;
  conn_->io([&](auto& s) { http::write_header(s, sr, ec); });
  conn_->no_deadline();
  if (ec || head_only_) gone_ = true;  // HEAD: the headers were the answer, and the handler stops
  return !gone_;
}

bool HttpResponder::write(const std::string& chunk) {
  if (!streaming_ || gone_) return false;
  if (chunk.empty()) return true;  // an empty chunk would end the body
  if (!conn_->write(http::make_chunk(asio::buffer(chunk)))) gone_ = true;
  return !gone_;
}

void HttpResponder::end_stream() {
  if (!streaming_ || gone_) return;
  if (!conn_->write(http::make_chunk_last())) gone_ = true;
  streaming_ = false;
}

bool HttpServer::tls_handshake(Connection& c, const std::string& remote) {
  const double limit = std::min(options_.tls_handshake_s, options_.read_timeout_s);
  beast::error_code ec;
  c.expire_in(limit);
  std::get<TlsStream>(c.stream).handshake(asio::ssl::stream_base::server, ec);
  c.no_deadline();
  if (!ec) return true;
  if (tls_got_plain_http(ec)) {
    // OpenSSL has read the request line: answer in plain text, so the
    // client sees why instead of a dropped connection.
    log("plain HTTP from " + remote + " on the HTTPS port: answered 400");
    const std::string body =
        R"json({"error":"this port speaks HTTPS: use https:// (a worker: https:// or wss://)","code":"bad_graph"})json"
        "\n";
    const std::string answer =
        "HTTP/1.1 400 Bad Request\r\nServer: bonfire\r\nContent-Type: application/json\r\nConnection: close\r\n"
        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    c.expire_in(c.write_timeout_s);
    asio::write(c.socket(), asio::buffer(answer), ec);
    c.no_deadline();
    c.linger();
    return false;
  }
  log("TLS handshake with " + remote + " failed: " +
      (c.expired ? "none within " + std::to_string(static_cast<int>(limit)) + " s" : tls_error_text(ec)));
  return false;
}

HttpServer::HttpServer(asio::io_context& ioc, const Options& options, HttpHandler handler, UpgradeHandler upgrade)
    : ioc_(ioc),
      options_(options),
      handler_(std::move(handler)),
      upgrade_(std::move(upgrade)),
      acceptor_(ioc),
      counts_(std::make_shared<ConnectionCounts>()) {
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (ec) throw Error(ErrorCode::BadGraph, "--host " + options.host + " is not an IP address");
  if (options.port < 0 || options.port > 65535)
    throw Error(ErrorCode::BadGraph, "port " + std::to_string(options.port) + " is not in 0-65535");
  tcp::endpoint ep(address, static_cast<unsigned short>(options.port));
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error(ErrorCode::Internal, "cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                                         ec.message());
  port_ = acceptor_.local_endpoint().port();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  accept_thread_ = std::thread([this] { accept_loop(); });
  watchdog_thread_ = std::thread([this] { watchdog(); });
}

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  // A blocking accept() is woken by shutdown(), not by close().
  ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  beast::error_code ec;
  acceptor_.close(ec);
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  std::unique_lock<std::mutex> lock(mu_);
  for (auto& [p, w] : live_)
    if (auto c = w.lock()) {
      c->deadline = 1;
      c->shutdown_if_late(now_ms());
    }
  // Connection threads use this object until they end: wait for them all.
  // Their sockets are shut down and (Server::stop) the worker links closed
  // first, so a handler still running fails its next write or call at once.
  idle_.wait(lock, [&] { return live_.empty(); });
}

void HttpServer::accept_loop() {
  while (!stopping_) {
    beast::error_code ec;
    // Each connection's own strand: what it may become, a worker link, runs
    // its handlers there (blocking HTTP calls ignore the executor).
    beast::tcp_stream s(asio::make_strand(ioc_));
    acceptor_.accept(s.socket(), ec);
    if (ec) {
      if (stopping_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // out of fds: breathe, do not spin
      continue;
    }
    s.socket().set_option(tcp::no_delay(true), ec);
    const auto ep = s.socket().remote_endpoint(ec);
    const std::string address = ec ? std::string("?") : ep.address().to_string();
    auto c = std::make_shared<Connection>(std::move(s), options_.tls.get());
    c->write_timeout_s = options_.write_timeout_s;
    std::string full;
    {
      std::lock_guard<std::mutex> lock(counts_->mu);
      if (counts_->open >= options_.max_connections)
        full = "the server has " + std::to_string(options_.max_connections) + " connections open; try again shortly";
      else if (counts_->per_address[address] >= options_.max_per_address)
        full = "this address has " + std::to_string(options_.max_per_address) + " connections open; close some first";
      if (full.empty()) {
        ++counts_->open;
        ++counts_->per_address[address];
      } else if (counts_->per_address[address] == 0) {
        counts_->per_address.erase(address);
      }
    }
    if (!full.empty()) {
      // A TLS connection is closed unanswered: answering would need its
      // handshake here, on the one thread that accepts.
      if (!c->tls()) {
        HttpResponder r(c.get(), false);
        r.send_json(503, {{"error", full}, {"code", "too_large"}});
      }
      c->close();
      continue;
    }
    auto slot = std::make_shared<Slot>(Slot{counts_, address});
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[c.get()] = c;
    }
    std::thread([this, c, slot]() mutable {
      serve(c, std::move(slot));
      c->close();
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(c.get());
      if (live_.empty()) idle_.notify_all();
    }).detach();
  }
}

void HttpServer::watchdog() {
  while (!stopping_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<std::shared_ptr<Connection>> conns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [p, w] : live_)
        if (auto c = w.lock()) conns.push_back(c);
    }
    const int64_t now = now_ms();
    for (auto& c : conns) c->shutdown_if_late(now);
  }
}

void HttpServer::serve(std::shared_ptr<Connection> c, std::shared_ptr<void> slot) {
  beast::flat_buffer buffer;
  std::string remote;
  {
    beast::error_code ec;
    auto ep = c->socket().remote_endpoint(ec);
    if (!ec) remote = ep.address().to_string();
  }
  if (c->tls() && !tls_handshake(*c, remote)) return;
  for (bool first = true;; first = false) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options_.max_body);
    parser.header_limit(64 * 1024);
    beast::error_code ec;
    c->expire_in(first ? options_.read_timeout_s : options_.keep_alive_s);
    c->io([&](auto& s) { http::read_header(s, buffer, parser, ec); });
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        (ec && buffer.size() == 0 && !parser.got_some()))
      return;
    auto refuse = [&](int status, const std::string& why) {
      c->no_deadline();
      HttpResponder r(c.get(), false);
      const std::string code = status == 413 ? "too_large" : status == 404 ? "not_found" : "bad_graph";
      if (options_.refuse) {
        HttpRequest partial;
        const std::string target(parser.get().target());  // "" until the request line is read
        partial.method = std::string(parser.get().method_string());
        partial.path = target.substr(0, target.find('?'));
        partial.remote = remote;
        partial.raw = &parser.get();
        options_.refuse(partial, status, code, why, r);
      }
      if (!r.answered()) r.send_json(status, {{"error", why}, {"code", code}});
      c->linger();  // the client may still be sending (a body over the limit)
    };
    // A TLS ClientHello starts with a handshake record (0x16): a client
    // that expects TLS here. Its 400 reads to it as "wrong version number".
    const auto* head = static_cast<const unsigned char*>(buffer.data().data());
    if (ec && first && !c->tls() && buffer.size() > 0 && head[0] == 0x16) {
      log("a TLS handshake from " + remote + " on a plain HTTP port (serve has no --tls-cert): answered 400");
      return refuse(400, "this port speaks plain HTTP, not TLS: use http://");
    }
    // A Content-Length over the limit is found with the header.
    if (ec == http::error::body_limit)
      return refuse(413, "the request body exceeds " + std::to_string(options_.max_body) + " bytes");
    if (ec) return refuse(400, "malformed HTTP request: " + ec.message());
    c->expire_in(options_.read_timeout_s);
    const std::string target(parser.get().target());
    const std::optional<std::string> decoded = percent_decode(target.substr(0, target.find('?')));
    if (!decoded) return refuse(400, "the request path has a malformed %-escape (or an escaped NUL)");
    const std::string& path = *decoded;
    if (boost::beast::websocket::is_upgrade(parser.get())) {
      if (path != options_.upgrade_path) return refuse(404, "no WebSocket at " + path);
      c->no_deadline();
      std::unique_lock<std::mutex> lock(c->mu);
      c->detached = true;
      ServerStream s = std::move(c->stream);
      lock.unlock();
      upgrade_(std::move(s), parser.release(), std::move(slot));
      return;
    }
    c->io([&](auto& s) { http::read(s, buffer, parser, ec); });
    if (ec == http::error::body_limit)
      return refuse(413, "the request body exceeds " + std::to_string(options_.max_body) + " bytes");
    if (ec) return refuse(400, "malformed or incomplete HTTP request: " + ec.message());
    c->no_deadline();
    const HttpRequestRaw& raw = parser.get();
    HttpRequest req;
    req.method = std::string(raw.method_string());
    req.path = path;
    req.query = target.size() > path.size() ? target.substr(path.size() + 1) : "";
    req.body = raw.body();
    req.remote = remote;
    req.raw = &raw;
    HttpResponder r(c.get(), raw.keep_alive(), raw.method() == http::verb::head);
    try {
      handler_(req, r);
    } catch (const std::exception& e) {
      if (!r.answered()) r.send_json(500, {{"error", std::string("internal error: ") + e.what()}, {"code", "internal"}});
    }
    if (!r.answered()) r.send_json(500, {{"error", "the handler gave no answer"}, {"code", "internal"}});
    if (!r.keep_alive()) return;
  }
}

}  // namespace bonfire::net
