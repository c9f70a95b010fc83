// A worker link: Messages (frame.h) both ways. WsLink is one WebSocket: each
// link's socket work runs on its own strand, so links are served side by
// side by the coordinator's I/O threads and one busy link cannot hold the
// others up; send() and close() may be called from any thread. A peer that
// goes silent is found by WebSocket pings (no pong within the idle timeout
// closes the link), one that sends garbage by decode_message; either way
// on_close runs once with the reason.
//
// Bounded on both sides: a received frame may not exceed the frame limit
// (small until the peer is known: set_max_frame raises it after a hello),
// and the bytes waiting to be sent may not exceed max_queue_bytes (a peer
// that stops reading is dropped rather than buffered without end).
//
// The WebSocket runs over plain TCP (ws://) or TLS (wss://, tls.h); the
// link behaves the same over either.
#pragma once
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "net/frame.h"
#include "net/tls.h"

namespace bonfire::net {

using WsStream = boost::beast::websocket::stream<boost::beast::tcp_stream>;
using WssStream = boost::beast::websocket::stream<TlsStream>;
class LinkSocket;  // the WebSocket, over either stream (link.cpp)

// What the coordinator and a worker use of a link, whatever carries it: the
// WebSocket below, or an in-process pair for serve's own worker
// (local_link.h).
class Link {
 public:
  using OnMessage = std::function<void(Message)>;  // must not block
  using OnClose = std::function<void(const std::string& reason)>;

  struct Options {
    uint64_t max_frame_bytes = uint64_t(1) << 30;  // one received frame
    uint64_t max_queue_bytes = uint64_t(2) << 30;  // waiting to be sent
    double idle_timeout_s = 20;
    Limits limits;  // what a received frame's tensors may hold
  };

  virtual ~Link() = default;
  // Messages arrive in the order they were sent, one at a time; on_close
  // runs once, with the reason.
  virtual void start(OnMessage on_message, OnClose on_close) = 0;
  virtual void send(const Message& m) = 0;
  virtual void close(const std::string& reason) = 0;
  // Raises (or lowers) the received-frame limit; call from on_message.
  virtual void set_max_frame(uint64_t bytes) = 0;
  virtual bool closed() const = 0;
  virtual std::string remote() const = 0;
  virtual std::string remote_address() const = 0;  // "" when not over a network
  virtual uint64_t queued_bytes() const = 0;
  // Where the link's timers may run.
  virtual boost::asio::any_io_executor executor() const = 0;
};

class WsLink final : public Link, public std::enable_shared_from_this<WsLink> {
 public:
  // `ws` has completed its handshake; its executor is the link's strand
  // (or a one-thread io_context). on_message and on_close run on it.
  // `keepalive` is held as long as the link lives (the HTTP server's count
  // of open connections).
  WsLink(WsStream ws, const Options& options, std::shared_ptr<void> keepalive = nullptr);
  WsLink(WssStream ws, const Options& options, std::shared_ptr<void> keepalive = nullptr);
  ~WsLink() override;
  void start(OnMessage on_message, OnClose on_close) override;
  void send(const Message& m) override;  // any thread
  void close(const std::string& reason) override;  // any thread
  void set_max_frame(uint64_t bytes) override;
  bool closed() const override { return closed_ || closing_; }
  std::string remote() const override { return remote_; }
  std::string remote_address() const override { return remote_address_; }
  uint64_t queued_bytes() const override { return queued_bytes_; }
  boost::asio::any_io_executor executor() const override;

 private:
  void read_next();
  void write_next();
  void fail(const std::string& reason, bool drop_socket = true);
  void close_now(const std::string& reason);
  void init();

  std::unique_ptr<LinkSocket> ws_;
  Options options_;
  std::shared_ptr<void> keepalive_;
  boost::beast::flat_buffer buffer_;
  std::deque<std::shared_ptr<std::string>> queue_;
  std::atomic<uint64_t> queued_bytes_{0};
  OnMessage on_message_;
  OnClose on_close_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> closing_{false};  // close() waits for a write in progress
  std::string closing_reason_;        // strand only
  std::string remote_, remote_address_;
};

}  // namespace bonfire::net
