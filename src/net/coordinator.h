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
#include <chrono>
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
#include "net/session_ledger.h"

namespace bonfire::net {

class LocalLink;

struct WorkerInfo {
  std::string id;
  std::string remote;
  std::string address;  // the remote address without the port (bans)
  std::set<std::string> ops, features;
  json limits;
  int64_t threads = 0;
  std::string simd;         // the SIMD target its kernels run on (hello "simd")
  // Which of its products use int8 activations (hello "int8Rows": "none",
  // "few", "any"; ops/gemm.h's Int8Rows); empty if it did not say. A checker
  // recomputing its steps follows it.
  std::string int8_rows;
  std::string kind = "native";  // "browser": a lent tab (hello "kind")
  // Where its steps run (hello "device"): {"type": "cpu" | "webgpu",
  // "adapter": NAME, "webgpu"?: the device file of a GPU it holds}.
  json device;
  bool background = false;  // lends idle time only (bonfire worker --background)
  int64_t memory = 0;
  bool fetch = false;                        // accepts models over HTTP
  bool local = false;                        // the coordinator's own worker (proved by its secret)
  std::map<std::string, std::string> models;  // id -> hash
  double joined = 0;                          // unix seconds
};

// Who asked for a call, which decides whose fault a failure is. A step of a
// generation is a graph the coordinator built: an error answering it (other
// than out of memory or time), or no answer in time, is the worker's fault.
// A client's own graph (/api/v3/graph) may be refused or run long through no
// fault of the worker's; only an internal error counts then.
enum class CallKind { Step, ClientGraph, Control };

// What a spot check (net/verifier.h) said of a worker's answers.
enum class CheckResult { Passed, Failed, Inconclusive };

class RemoteWorker {
 public:
  // Wrong answers in a row after which a worker is dropped.
  static constexpr int kMaxStrikes = 3;
  // Frames a worker may send that answer nothing, over its link's life.
  static constexpr int kMaxUnsolicited = 16;

  RemoteWorker(WorkerInfo info, std::shared_ptr<Link> link) : info_(std::move(info)), link_(std::move(link)) {}
  // Sends `m` with a fresh "req" and its time budget ("timeoutMs": the worker
  // stops the call then too), and waits for the reply. A reply may carry only
  // the tensors named in `expect` (when given) and at most m's
  // "maxOutputBytes". Throws the Error a worker's "error" reply carries;
  // Error(Timeout) after `timeout_s`; Error(NoWorker) when the link drops
  // first or the reply is malformed (the caller may fail over). Faults count
  // as strikes by `kind` (see CallKind); kMaxStrikes in a row drop the worker.
  Message call(Message m, double timeout_s, CallKind kind = CallKind::Step,
               const std::set<std::string>* expect = nullptr);
  void send(const Message& m) { link_->send(m); }
  void close(const std::string& reason) { link_->close(reason); }
  // A wrong answer found by the caller (e.g. a token outside the vocabulary).
  void strike(const std::string& why);

  WorkerInfo info() const;
  const std::string& id() const { return info_.id; }  // never changes
  void add_model(const std::string& id, const std::string& hash);
  bool alive() const { return !link_->closed(); }
  int in_flight() const { return in_flight_; }
  double ms_per_call() const;
  // A one-row decode step over a stage of `bytes` of weights answered in
  // `ms` (its round trip): the worker's measured speed, a moving average of
  // bytes / ms (net/placement.h). measured_gbs() is 0 until kSpeedSamples
  // steps.
  static constexpr int64_t kSpeedSamples = 2;
  void note_speed(int64_t bytes, double ms);
  double measured_gbs() const;
  // Hello "device.readGBs" (0: none); the device never changes.
  double announced_gbs() const { return info_.device.value("readGBs", 0.0); }
  nlohmann::json speed() const;  // {"measuredGBs", "samples", "announcedGBs"}
  int64_t calls() const { return calls_; }
  // Generation steps answered (a batched call's rows each count).
  int64_t steps() const { return steps_; }
  void note_steps(int64_t n) { steps_ += n; }
  int strikes() const { return strikes_; }
  bool has_graph(const std::string& key);
  void note_graph(const std::string& key);

  // Spot checks of this worker's answers (net/verifier.h). A worker is
  // trusted when it is the coordinator's own or has passed kTrustedAfter
  // checks and failed none; placement and the verifier prefer those.
  static constexpr int64_t kTrustedAfter = 3;
  void note_check(CheckResult r);
  bool trusted() const;
  nlohmann::json checks() const;  // {"passed", "failed", "inconclusive", "trusted"}

  // From the link (its strand).
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
  void unsolicited(const std::string& what);

  mutable std::mutex mu_;
  WorkerInfo info_;
  std::shared_ptr<Link> link_;
  std::map<int64_t, std::shared_ptr<Pending>> pending_;
  std::set<int64_t> abandoned_;  // timed out: a late answer is not unsolicited
  std::set<std::string> graphs_;
  int64_t next_req_ = 1;
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> steps_{0};
  std::atomic<int> strikes_{0};
  std::atomic<int64_t> checks_passed_{0}, checks_failed_{0}, checks_inconclusive_{0};
  int unsolicited_ = 0;
  double ewma_ms_ = 0;
  double speed_gbs_ = 0;
  int64_t speed_samples_ = 0;
  std::string closed_reason_;
};

class Coordinator {
 public:
  struct Options {
    std::string token;           // workers must present it ("" = open network)
    std::string local_secret;    // the only key to the id "local" ("" = no local worker)
    double idle_timeout_s = 20;  // a silent link is closed after this
    uint64_t max_frame_bytes = uint64_t(1) << 30;
    uint64_t hello_max_bytes = 16 << 10;  // any frame before a welcome
    int io_threads = 2;                    // links are spread over these
    std::set<std::string> never_ban;       // addresses a ban leaves alone (loopback always is)
  };
  explicit Coordinator(Options options);
  ~Coordinator();
  boost::asio::io_context& io() { return ioc_; }
  const Options& options() const { return options_; }

  // Takes a connection (plain or TLS, on a strand of io()) that asked for a
  // WebSocket at /api/v3/worker; `slot` is held while the link lives (the
  // HTTP server's connection count).
  void accept(ServerStream stream, HttpRequestRaw request, std::shared_ptr<void> slot = nullptr);
  // A link for this process's own worker (serve's), without a socket
  // (local_link.h): the coordinator takes one end as it takes an accepted
  // WebSocket, the worker gets the other.
  std::shared_ptr<LocalLink> connect_local();
  // Closes every link and refuses new ones; waits for the on_join threads.
  // Calls in flight fail at once with NoWorker. Idempotent.
  void shutdown();

  std::vector<std::shared_ptr<RemoteWorker>> workers() const;
  std::shared_ptr<RemoteWorker> find(const std::string& id) const;
  // The session memory generations have placed on each worker (admission
  // by KV memory, net/session_ledger.h).
  SessionLedger& sessions() { return sessions_; }
  const SessionLedger& sessions() const { return sessions_; }
  // The best worker for a graph; `model_hash` "" when no model is needed.
  // Throws Error(UnsupportedFeature) naming a feature no connected worker
  // has, else Error(NoWorker).
  std::shared_ptr<RemoteWorker> pick(const std::set<std::string>& ops, const std::set<std::string>& features,
                                     const std::string& model_hash, const std::set<std::string>& exclude = {}) const;

  // Shuts a worker out for `seconds`: its link is closed (its calls fail
  // over) and a worker with its id, or from its address, is refused until
  // then. Loopback addresses and Options::never_ban are banned by id only.
  // False when a ban of that id is already in force.
  bool ban(RemoteWorker& w, double seconds, const std::string& reason);
  // Bans in force: [{"id", "address", "reason", "steps", "secondsLeft"}].
  nlohmann::json bans() const;

  // Joined, left, refused, dropped: for the log line and the metrics.
  std::function<void(const std::string& event, const std::string& worker, const std::string& detail)> on_event;
  // A worker that joined (models may be offered to it); runs on its own
  // thread, joined by shutdown().
  std::function<void(std::shared_ptr<RemoteWorker>)> on_join;

 private:
  void attach(std::shared_ptr<Link> link);
  void hello(std::shared_ptr<Link> link, const Message& m, std::shared_ptr<std::shared_ptr<RemoteWorker>> slot);
  void event(const std::string& e, const std::string& w, const std::string& d) {
    if (on_event) on_event(e, w, d);
  }

  Options options_;
  SessionLedger sessions_;
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<RemoteWorker>> workers_;
  std::vector<std::weak_ptr<Link>> links_;  // every link accepted (shutdown closes them)
  std::vector<std::thread> join_threads_;
  bool shut_ = false;
  int64_t next_id_ = 1;
  struct Ban {
    std::string id, address, reason;
    int64_t steps = 0;  // the worker's steps answered before the ban
    std::chrono::steady_clock::time_point until;
  };
  std::vector<Ban> bans_;  // under mu_
  // The ban that refuses this id or address, if any (under mu_).
  const Ban* banned(const std::string& id, const std::string& address) const;
};

// Compares secrets (tokens, API keys) in time that does not depend on where
// they differ.
bool same_secret(const std::string& a, const std::string& b);

// Seconds since 1970 (what "created" and "joined" fields carry).
double unix_now();

}  // namespace bonfire::net
