#include "net/local_link.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

#include "core/hop_trace.h"

namespace bonfire::net {

struct LocalLink::Pipe {
  std::mutex mu;
  std::condition_variable idle;  // an end's delivering went false
  bool closed = false;
  std::string reason;
  // Messages to one end, and what that end does with them.
  struct Inbox {
    std::deque<Message> queue;
    bool delivering = false;
    bool started = false;
    OnMessage on_message;
    OnClose on_close;
  } inbox[2];
  std::shared_ptr<LocalLink> ends[2];  // the pair lives until closed

  // Delivers what waits for end `to`, on this thread; the caller has set
  // inbox[to].delivering.
  void drain(int to) {
    Inbox& in = inbox[to];
    OnMessage deliver;
    {
      std::lock_guard<std::mutex> lock(mu);
      deliver = in.on_message;
    }
    std::string failure;
    while (true) {
      Message m;
      {
        // Stopping and the emptiness check under one lock: a message sent
        // in between would otherwise wait for a deliverer that has left.
        std::lock_guard<std::mutex> lock(mu);
        if (closed || in.queue.empty() || !failure.empty()) {
          in.queue.clear();
          in.delivering = false;
          idle.notify_all();
          break;
        }
        m = std::move(in.queue.front());
        in.queue.pop_front();
      }
      try {
        deliver(std::move(m));
      } catch (const std::exception& e) {
        failure = std::string("a message handler failed: ") + e.what();
      }
    }
    if (!failure.empty()) close_both(failure);
  }

  void close_both(const std::string& why) {
    OnClose handlers[2];
    std::shared_ptr<LocalLink> keep[2];  // released after the handlers ran
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed) return;
      closed = true;
      reason = why;
      for (int i = 0; i < 2; ++i) {
        handlers[i] = std::move(inbox[i].on_close);
        inbox[i].on_message = nullptr;
        if (!inbox[i].delivering) inbox[i].queue.clear();
        keep[i] = std::move(ends[i]);
      }
    }
    for (auto& h : handlers)
      if (h) h(why);
  }
};

namespace {

// What the wire would deliver (frame.cpp): packed tensors dequantized, every
// tensor a fresh buffer of 4-byte values, so neither end shares memory with
// the other.
Message wire_copy(const Message& m) {
  Message out(m.header);
  for (const auto& [name, t] : m.tensors) {
    if (t.packed()) {
      out.tensors.emplace(name, to_f32(t));
      continue;
    }
    Tensor c = Tensor::empty(t.shape);
    if (t.numel() > 0) std::memcpy(c.data, t.data, static_cast<size_t>(t.numel()) * sizeof(float));
    out.tensors.emplace(name, std::move(c));
  }
  return out;
}

}  // namespace

LocalLink::LocalLink(std::shared_ptr<Pipe> pipe, int side, boost::asio::any_io_executor executor)
    : pipe_(std::move(pipe)), side_(side), executor_(std::move(executor)) {}

LocalLink::~LocalLink() = default;

std::pair<std::shared_ptr<LocalLink>, std::shared_ptr<LocalLink>> make_local_link(
    boost::asio::any_io_executor executor) {
  auto pipe = std::make_shared<LocalLink::Pipe>();
  auto a = std::make_shared<LocalLink>(pipe, 0, executor);
  auto b = std::make_shared<LocalLink>(pipe, 1, executor);
  pipe->ends[0] = a;
  pipe->ends[1] = b;
  return {a, b};
}

void LocalLink::start(OnMessage on_message, OnClose on_close) {
  Pipe& p = *pipe_;
  Pipe::Inbox& in = p.inbox[side_];
  std::string closed_why;
  bool was_closed = false;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    was_closed = p.closed;
    if (was_closed) {
      closed_why = p.reason;
    } else {
      in.on_message = std::move(on_message);
      in.on_close = std::move(on_close);
      in.started = true;
      if (in.queue.empty() || in.delivering) return;
      in.delivering = true;
    }
  }
  if (was_closed) {
    if (on_close) on_close(closed_why);
    return;
  }
  p.drain(side_);  // what was sent before this end started
}

void LocalLink::send(const Message& m) {
  hop_trace("link.send");
  Message copy = wire_copy(m);
  Pipe& p = *pipe_;
  const int to = 1 - side_;
  Pipe::Inbox& in = p.inbox[to];
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.closed) return;
    in.queue.push_back(std::move(copy));
    if (in.delivering || !in.started) return;  // the deliverer, or start(), takes it
    in.delivering = true;
  }
  p.drain(to);
}

void LocalLink::close(const std::string& reason) { pipe_->close_both(reason); }

bool LocalLink::closed() const {
  std::lock_guard<std::mutex> lock(pipe_->mu);
  return pipe_->closed;
}

void LocalLink::wait_idle() {
  std::unique_lock<std::mutex> lock(pipe_->mu);
  pipe_->idle.wait(lock, [&] { return !pipe_->inbox[side_].delivering; });
}

}  // namespace bonfire::net
