#include "net/link.h"

#include <boost/asio/post.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "core/error.h"
#include "core/hop_trace.h"

namespace bonfire::net {

namespace beast = boost::beast;
namespace websocket = beast::websocket;

// The WebSocket operations a link uses, whatever carries them: one virtual
// call per operation is nothing beside a frame's work, and the link's logic
// stays one piece of code for ws:// and wss://.
class LinkSocket {
 public:
  using Handler = std::function<void(beast::error_code, size_t)>;
  virtual ~LinkSocket() = default;
  virtual beast::tcp_stream& tcp() = 0;
  virtual void async_read(beast::flat_buffer& buffer, Handler h) = 0;
  virtual void async_write(boost::asio::const_buffer b, Handler h) = 0;
  virtual void async_close(const websocket::close_reason& cr, std::function<void(beast::error_code)> h) = 0;
  virtual void read_message_max(uint64_t bytes) = 0;
  virtual uint64_t read_message_max() const = 0;
};

namespace {

// A buffer that grew for a large frame gives its memory back afterwards, so
// one big message does not stay allocated for the link's lifetime.
constexpr size_t kKeepBufferBytes = size_t(4) << 20;

template <class Ws>
class LinkSocketOf final : public LinkSocket {
 public:
  LinkSocketOf(Ws ws, const Link::Options& options) : ws_(std::move(ws)) {
    websocket::stream_base::timeout t{};
    t.handshake_timeout = std::chrono::seconds(30);
    t.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(options.idle_timeout_s * 1000));
    t.keep_alive_pings = true;
    ws_.set_option(t);
    ws_.read_message_max(options.max_frame_bytes);
    ws_.binary(true);
  }
  beast::tcp_stream& tcp() override { return beast::get_lowest_layer(ws_); }
  void async_read(beast::flat_buffer& buffer, Handler h) override { ws_.async_read(buffer, std::move(h)); }
  void async_write(boost::asio::const_buffer b, Handler h) override { ws_.async_write(b, std::move(h)); }
  void async_close(const websocket::close_reason& cr, std::function<void(beast::error_code)> h) override {
    ws_.async_close(cr, std::move(h));
  }
  void read_message_max(uint64_t bytes) override { ws_.read_message_max(bytes); }
  uint64_t read_message_max() const override { return ws_.read_message_max(); }

 private:
  Ws ws_;
};

}  // namespace

WsLink::WsLink(WsStream ws, const Options& options, std::shared_ptr<void> keepalive)
    : ws_(std::make_unique<LinkSocketOf<WsStream>>(std::move(ws), options)),
      options_(options),
      keepalive_(std::move(keepalive)) {
  init();
}

WsLink::WsLink(WssStream ws, const Options& options, std::shared_ptr<void> keepalive)
    : ws_(std::make_unique<LinkSocketOf<WssStream>>(std::move(ws), options)),
      options_(options),
      keepalive_(std::move(keepalive)) {
  init();
}

WsLink::~WsLink() = default;

void WsLink::init() {
  beast::error_code ec;
  const auto ep = ws_->tcp().socket().remote_endpoint(ec);
  if (!ec) {
    remote_address_ = ep.address().to_string();
    remote_ = remote_address_ + ":" + std::to_string(ep.port());
  }
  // One small frame per step each way: Nagle's delay would dominate a step.
  ws_->tcp().socket().set_option(boost::asio::ip::tcp::no_delay(true), ec);
  ws_->tcp().expires_never();
}

boost::asio::any_io_executor WsLink::executor() const { return ws_->tcp().get_executor(); }

void WsLink::start(OnMessage on_message, OnClose on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  boost::asio::post(executor(), [self = shared_from_this()] { self->read_next(); });
}

void WsLink::set_max_frame(uint64_t bytes) { ws_->read_message_max(bytes); }

void WsLink::read_next() {
  ws_->async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
    hop_trace("link.read");
    if (ec) {
      if (ec == websocket::error::message_too_big)
        return self->fail("the peer sent a frame over the limit of " +
                          std::to_string(self->ws_->read_message_max()) + " bytes");
      return self->fail(ec == websocket::error::closed ? "the peer closed the link" : ec.message());
    }
    Message m;
    try {
      const auto data = self->buffer_.cdata();
      m = decode_message(std::string_view(static_cast<const char*>(data.data()), data.size()), self->options_.limits);
    } catch (const Error& e) {
      return self->fail(std::string("garbage from the peer: ") + e.what());
    }
    self->buffer_.consume(self->buffer_.size());
    if (self->buffer_.capacity() > kKeepBufferBytes) self->buffer_.shrink_to_fit();
    if (self->on_message_) self->on_message_(std::move(m));
    if (!self->closed_) self->read_next();
  });
}

void WsLink::send(const Message& m) {
  if (closed_) return;
  auto bytes = std::make_shared<std::string>(encode_message(m));
  const uint64_t n = bytes->size();
  if (queued_bytes_ + n > options_.max_queue_bytes) {
    close("over " + std::to_string(options_.max_queue_bytes) + " bytes are waiting to be sent: the peer is not reading");
    return;
  }
  queued_bytes_ += n;
  hop_trace("link.send");
  boost::asio::post(executor(), [self = shared_from_this(), bytes] {
    if (self->closed_ || self->closing_) {
      self->queued_bytes_ -= bytes->size();
      return;
    }
    hop_trace("link.write");
    self->queue_.push_back(bytes);
    if (self->queue_.size() == 1) self->write_next();
  });
}

void WsLink::write_next() {
  ws_->async_write(boost::asio::buffer(*queue_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
    hop_trace("link.written");
    if (ec) return self->fail("write failed: " + ec.message());
    self->queued_bytes_ -= self->queue_.front()->size();
    self->queue_.pop_front();
    if (self->closed_) return;
    if (!self->queue_.empty()) self->write_next();
    else if (self->closing_) self->close_now(self->closing_reason_);
  });
}

void WsLink::close(const std::string& reason) {
  boost::asio::post(executor(), [self = shared_from_this(), reason] {
    if (self->closed_ || self->closing_) return;
    if (self->queue_.empty()) return self->close_now(reason);
    // A WebSocket allows one write at a time, and a close is a write: wait
    // for the queue (often the message saying why, e.g. "refused") to go
    // out. A peer that never takes it is dropped when the deadline passes.
    self->closing_reason_ = reason;
    self->closing_ = true;
    self->ws_->tcp().expires_after(std::chrono::seconds(5));
  });
}

void WsLink::close_now(const std::string& reason) {
  // Tell the peer why, then drop the socket whatever it answers.
  websocket::close_reason cr(websocket::close_code::policy_error, reason.substr(0, 120));
  ws_->async_close(cr, [self = shared_from_this()](beast::error_code) { self->ws_->tcp().close(); });
  fail(reason, false);
}

void WsLink::fail(const std::string& reason, bool drop_socket) {
  if (closed_.exchange(true)) return;
  // The queue is kept: a write in flight still reads its front buffer until
  // its handler runs (closed_ stops any further write).
  if (drop_socket) ws_->tcp().close();
  if (on_close_) on_close_(reason);
  on_message_ = nullptr;
  on_close_ = nullptr;
}

}  // namespace bonfire::net
