// A volunteer worker (`bonfire worker --join URL`): connects out to a
// coordinator over a WebSocket, announces what it can run (protocol, ops,
// features, limits, threads, memory, models held), then runs the graph calls
// it is sent and keeps their sessions. Its own limits apply whatever the
// coordinator asks: --memory bounds a received frame, the queue and the
// sessions together with what a call may allocate; every call has a time
// budget. Work runs in lanes, each on its own thread: generation steps,
// clients' own graphs ("lane": "graph") and model loads, so a long client
// graph or a download never holds a generation up. Messages: docs/NETWORK.md.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace bonfire::net {

class LocalLink;

struct WorkerOptions {
  std::string join;                  // the coordinator's URL
  std::vector<std::string> models;   // model folders or GGUF files held locally
  std::string token;                 // the network's shared secret
  std::string id;                    // "" lets the coordinator name it
  int64_t memory = 0;                // bytes this worker lends; 0 = MemAvailable at start
  std::set<std::string> disabled_features;  // run as a worker without these
  std::string cache_dir;             // where models fetched from the coordinator go
  int64_t cache_max = 0;             // bytes the cache may hold (0: no cap); least recently used go first
  std::string ca_file;               // https:// or wss:// join: the CAs to trust ("": the system's)
  std::string local_secret;          // proves this is the coordinator's own worker (serve sets it)
  // Serve's own worker: a link in the same process instead of dialing
  // `join` (Coordinator::connect_local; local_link.h). `join` then only
  // names the coordinator in the log.
  std::function<std::shared_ptr<LocalLink>()> local_link;
  double call_max_s = 600;           // no call runs longer, whatever the coordinator asks
  bool fetch_models = true;          // accept models from the coordinator
  bool reconnect = true;             // after the coordinator goes away
  double connect_timeout_s = 30;     // to reach the coordinator at first
  double session_ttl_s = 1800;       // idle sessions are freed after this
  bool quiet = false;
  // The read bandwidth it announces, GB/s (hello "device.readGBs",
  // placement's guess at its speed until its steps are timed): < 0 measures
  // it at start, 0 announces none.
  double read_gbs = -1;
  std::string fault;        // test aids: "lie=P", "slow=MS" (net/worker_fault.h)
  uint64_t fault_seed = 0;  // the fault's coin; 0 draws one
};

class Worker {
 public:
  explicit Worker(WorkerOptions options);
  ~Worker();
  // Connects and serves until stop() or a refusal; reconnects when the link
  // drops (if options.reconnect). Returns 0, or 1 when the coordinator
  // refused it or could not be reached.
  int run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Bytes of memory available now (MemAvailable), 0 when unknown.
int64_t available_memory();

}  // namespace bonfire::net
