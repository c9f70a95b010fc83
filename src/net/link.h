// A worker link: one WebSocket carrying Messages (frame.h) both ways. All
// socket work runs on one io_context thread; send() and close() may be
// called from any thread. A peer that goes silent is found by WebSocket
// pings (no pong within the idle timeout closes the link), one that sends
// garbage by decode_message; either way on_close runs once with the reason.
#pragma once
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "net/frame.h"

namespace bonfire::net {

using WsStream = boost::beast::websocket::stream<boost::beast::tcp_stream>;

class Link : public std::enable_shared_from_this<Link> {
 public:
  using OnMessage = std::function<void(Message)>;  // runs on the io thread: must not block
  using OnClose = std::function<void(const std::string& reason)>;

  // `ws` has completed its handshake. `limits` bound what a received frame
  // may hold; `max_frame_bytes` bounds the frame itself.
  Link(WsStream ws, const Limits& limits, uint64_t max_frame_bytes, double idle_timeout_s);
  void start(OnMessage on_message, OnClose on_close);
  void send(const Message& m);
  void close(const std::string& reason);
  bool closed() const { return closed_ || closing_; }
  std::string remote() const { return remote_; }

 private:
  void read_next();
  void write_next();
  void fail(const std::string& reason, bool drop_socket = true);
  void close_now(const std::string& reason);

  WsStream ws_;
  Limits limits_;
  boost::beast::flat_buffer buffer_;
  std::deque<std::shared_ptr<std::string>> queue_;
  OnMessage on_message_;
  OnClose on_close_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> closing_{false};  // close() waits for a write in progress
  std::string closing_reason_;        // io thread only
  std::string remote_;
};

}  // namespace bonfire::net
