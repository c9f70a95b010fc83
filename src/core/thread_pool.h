// A fixed set of threads that run one job of numbered chunks at a time, the
// calling thread included. bonfire's own, in place of OpenMP: a volunteer's
// machine does other things, and a worker also moves bytes over the network,
// so a helper never spins for long. After a job it polls for the next one for
// `spin_us` microseconds (the ops of a decode step follow each other within
// that), then sleeps on a futex until woken; a worker waiting for the network
// leaves its cores to the I/O threads and to the volunteer.
//
// Promises:
// - run() returns after fn(c) has returned for every c in [0, chunks), each
//   called exactly once, on the caller or on up to `width - 1` helpers.
// - Chunks are handed out one at a time, so a helper the OS has descheduled
//   holds up at most the chunk it took.
// - run() from inside a chunk, or while another thread's job holds the pool,
//   runs the chunks inline on the calling thread: no thread waits for
//   another's job, and nesting cannot deadlock.
// - An exception thrown by fn is rethrown by run() on the caller (the first
//   one; the remaining chunks still run).
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace bonfire {

class ThreadPool {
 public:
  // `threads` counts the caller: threads - 1 helpers are started.
  explicit ThreadPool(int threads, int spin_us = 100);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  // fn(c) for c in [0, chunks) on min(width, size()) threads.
  void run(int64_t chunks, int width, const std::function<void(int64_t)>& fn);

  // Helpers polling for a next job go to sleep now instead of at the end
  // of spin_us: the caller knows none follows soon (a worker that has
  // answered and waits for the network), and their polling would hold the
  // cores the I/O threads need to pass the answer on. A new job wakes them.
  void rest();

  // Lowest priority (nice 19) for the helpers, or back to normal (which an
  // unprivileged process may not be allowed). The caller's own thread is the
  // caller's: set_thread_background with its id.
  void set_background(bool on);
  static void set_thread_background(int tid, bool on);  // tid 0: nothing to set
  static int current_tid();  // the calling thread's OS id (0 where there is none)

  // True on a helper thread or inside a chunk run by run().
  static bool in_job();

 private:
  void helper_main(int index, uint32_t seen);
  void work(uint32_t epoch);
  bool claim(uint32_t epoch, int64_t* chunk);
  void run_chunk(int64_t chunk);

  const int spin_us_;
  std::vector<std::thread> helpers_;
  std::vector<int> helper_tids_;
  std::mutex job_mutex_;  // one job at a time; others run inline

  // The job. fn_ and width_ are written before epoch_ announces the job and
  // read by a helper only after it claimed a chunk, which keeps the job alive.
  const std::function<void(int64_t)>* fn_ = nullptr;
  std::atomic<int> width_{0};
  // (epoch << 32) | (next chunk << 16) | chunks: claiming is one CAS that
  // fails if the job it was meant for has been replaced.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint32_t> epoch_{0};     // helpers wait on this
  std::atomic<uint32_t> pending_{0};   // chunks not finished; the caller waits on this
  std::atomic<int> sleepers_{0};       // helpers asleep on epoch_
  std::atomic<bool> caller_asleep_{false};
  std::atomic<bool> resting_{false};    // rest(): stop polling; cleared by the next job
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace bonfire
