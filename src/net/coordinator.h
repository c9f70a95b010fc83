// The coordinator's side of the worker links: who is connected, what each
// can run, and calls to them. A worker joins with a hello (protocol version,
// ops, features, limits, threads, memory, models held; the network's token),
// is refused with a reason or welcomed with its id, and then answers "run"
// messages. Routing picks, among the workers that have every op and feature
// a graph uses (and the model's exact files, by hash), the one with the
// least expected wait: (calls in flight + 1) × its measured time per call.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "net/http_server.h"
#include "net/link.h"

namespace bonfire::net {

struct WorkerInfo {
  std::string id;
  std::string remote;
  std::set<std::string> ops, features;
  json limits;
  int64_t threads = 0;
  int64_t memory = 0;
  bool fetch = false;                        // accepts models over HTTP
  std::map<std::string, std::string> models;  // id -> hash
  double joined = 0;                          // unix seconds
};

class RemoteWorker {
 public:
  RemoteWorker(WorkerInfo info, std::shared_ptr<Link> link) : info_(std::move(info)), link_(std::move(link)) {}
  // Sends `m` with a fresh "req" and waits for the reply. Throws the Error a
  // worker's "error" reply carries; Error(Timeout) after `timeout_s`;
  // Error(NoWorker) when the link drops first (the caller may fail over).
  Message call(Message m, double timeout_s);
  void send(const Message& m) { link_->send(m); }
  void close(const std::string& reason) { link_->close(reason); }

  WorkerInfo info() const;
  void add_model(const std::string& id, const std::string& hash);
  bool alive() const { return !link_->closed(); }
  int in_flight() const { return in_flight_; }
  double ms_per_call() const;
  int64_t calls() const { return calls_; }
  bool has_graph(const std::string& key);
  void note_graph(const std::string& key);

  // From the link (io thread).
  void on_reply(Message m);
  void on_close(const std::string& reason);

 private:
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Message reply;
    std::string failure;
  };
  mutable std::mutex mu_;
  WorkerInfo info_;
  std::shared_ptr<Link> link_;
  std::map<int64_t, std::shared_ptr<Pending>> pending_;
  std::set<std::string> graphs_;
  int64_t next_req_ = 1;
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> calls_{0};
  double ewma_ms_ = 0;
  std::string closed_reason_;
};

class Coordinator {
 public:
  struct Options {
    std::string token;          // workers must present it ("" = open network)
    double idle_timeout_s = 20;  // a silent link is closed after this
    uint64_t max_frame_bytes = uint64_t(1) << 30;
  };
  explicit Coordinator(Options options);
  ~Coordinator();
  boost::asio::io_context& io() { return ioc_; }

  // Takes a socket that asked for a WebSocket at /api/v3/worker.
  void accept(boost::asio::ip::tcp::socket socket, HttpRequestRaw request);

  std::vector<std::shared_ptr<RemoteWorker>> workers() const;
  std::shared_ptr<RemoteWorker> find(const std::string& id) const;
  // The best worker for a graph; `model_hash` "" when no model is needed.
  // Throws Error(UnsupportedFeature) naming a feature no connected worker
  // has, else Error(NoWorker).
  std::shared_ptr<RemoteWorker> pick(const std::set<std::string>& ops, const std::set<std::string>& features,
                                     const std::string& model_hash, const std::set<std::string>& exclude = {}) const;

  // Joined, left, refused: for the log line and the metrics.
  std::function<void(const std::string& event, const std::string& worker, const std::string& detail)> on_event;
  // A worker that joined (models may be offered to it).
  std::function<void(std::shared_ptr<RemoteWorker>)> on_join;

 private:
  void hello(std::shared_ptr<Link> link, const Message& m, std::shared_ptr<std::shared_ptr<RemoteWorker>> slot);
  void event(const std::string& e, const std::string& w, const std::string& d) {
    if (on_event) on_event(e, w, d);
  }

  Options options_;
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<RemoteWorker>> workers_;
  int64_t next_id_ = 1;
};

}  // namespace bonfire::net
