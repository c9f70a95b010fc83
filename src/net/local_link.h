// Two ends of an in-process link: serve's own worker and its coordinator in
// one process, without a socket. A message is handed to the other end as a
// copy of what the wire would carry (every tensor a fresh f32 buffer), with
// no encoding, and delivered on the sending thread: a step's answer reaches
// the waiting generation without waking an I/O thread on either side
// (docs/PERFORMANCE.md has the hops this removes).
//
// Ordering is per direction, as on a WebSocket: one thread delivers to an
// end at a time, and a message sent while another is being delivered to the
// same end waits in a queue that deliverer empties. A handler that sends to
// the other end therefore runs that end's handler on its own thread (nested
// once at most), never its own end's again. on_message handlers must not
// block, as with any link; one that throws closes the link, naming what.
//
// The pair keeps itself alive until closed; close() from either end (or
// from any thread) closes both and runs both on_close handlers once.
#pragma once
#include <memory>
#include <string>
#include <utility>

#include "net/link.h"

namespace bonfire::net {

class LocalLink final : public Link {
 public:
  struct Pipe;
  LocalLink(std::shared_ptr<Pipe> pipe, int side, boost::asio::any_io_executor executor);
  ~LocalLink() override;

  void start(OnMessage on_message, OnClose on_close) override;
  void send(const Message& m) override;
  void close(const std::string& reason) override;
  void set_max_frame(uint64_t) override {}
  bool closed() const override;
  std::string remote() const override { return "in-process"; }
  std::string remote_address() const override { return ""; }
  uint64_t queued_bytes() const override { return 0; }
  boost::asio::any_io_executor executor() const override { return executor_; }

  // Returns once no thread is delivering to this end. After close(), no
  // delivery starts again, so its handlers' objects may then go.
  void wait_idle();

 private:
  std::shared_ptr<Pipe> pipe_;
  int side_;
  boost::asio::any_io_executor executor_;
};

// The two ends; `executor` runs the ends' timers (the coordinator's).
std::pair<std::shared_ptr<LocalLink>, std::shared_ptr<LocalLink>> make_local_link(
    boost::asio::any_io_executor executor);

}  // namespace bonfire::net
