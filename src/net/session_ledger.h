// The coordinator's account of the session memory it has placed on each
// worker (continuous batching's admission by KV memory, docs/NETWORK.md).
//
// A generation reserves, for each stage of its pipeline, what that stage's
// session keeps on its worker (its layers' caches at the served context)
// before its first call, and gives it back when it ends or moves. A worker
// takes sessions up to kShareNum / kShareDen of the memory it announced; the rest is
// left for the calls themselves (a prefill chunk's intermediates, frames in
// its queue). A generation that does not fit waits until another gives
// memory back, so a full worker queues new sequences instead of refusing
// them mid-prefill, and the running batch is undisturbed.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace bonfire::net {

class SessionLedger {
 public:
  // Sessions may use this share of a worker's announced memory.
  static constexpr int64_t kShareNum = 3, kShareDen = 4;
  static int64_t session_budget(int64_t announced_memory) { return announced_memory / kShareDen * kShareNum; }

  struct Claim {
    std::string worker;
    int64_t bytes = 0;
    int64_t budget = 0;  // session_budget of the worker's memory
  };

  // A worker a reservation would take past its budget.
  struct Shortfall {
    std::string worker;
    int64_t held = 0, asked = 0, budget = 0;  // reserved there now; the claims' sum there
  };
  // Reserves every claim or none: returns the workers without room (claims
  // on one worker, two stages of a pipeline, count together); empty when
  // everything was reserved.
  std::vector<Shortfall> try_reserve(const std::vector<Claim>& claims);
  // Gives claims back (each exactly once) and wakes the waiting.
  void release(const std::vector<Claim>& claims);
  // Blocks until something is given back or `until`; false at `until`.
  // Counted in waiting() meanwhile.
  bool wait_for_release(std::chrono::steady_clock::time_point until);

  int waiting() const;                                // generations blocked in wait_for_release
  int64_t reserved(const std::string& worker) const;  // bytes reserved on a worker now

 private:
  mutable std::mutex mu_;
  std::condition_variable released_;
  std::map<std::string, int64_t> reserved_;
  uint64_t releases_ = 0;  // counts release() calls, so a waiter sees one that happened
  int waiting_ = 0;
};

}  // namespace bonfire::net
