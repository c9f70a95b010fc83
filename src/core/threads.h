// The one way work is split over a worker's threads: a ThreadPool of our own
// (core/thread_pool.h), sized once, and one parallel_for. Ops call
// parallel_for and never start threads of their own.
//
// A volunteer's controls live here too: the thread count, and background
// mode, in which the pool runs at the lowest scheduling priority and uses
// fewer threads while other programs keep the machine's cores busy
// (adapt_to_machine_load, called by the worker before each step).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace bonfire {

// Cores this process may run on (its CPU affinity mask).
int available_cores();

// A --threads value checked: below 1 throws std::invalid_argument (naming
// the flag and the cores there are); above the cores is lowered to them with
// a warning in `*warning`.
int checked_thread_count(int requested, std::string* warning);

// Starts (or restarts) the pool with n threads, the caller included;
// n <= 0 means all available cores. Not to be called while a job runs.
void set_num_threads(int n);
int num_threads();     // the pool's size
int active_threads();  // how many parallel_for uses now (background mode may lower it)

// Background mode: lowest priority for the pool's threads and for every
// thread that calls parallel_for while it is on; the thread count adapts to
// the machine's other load. Returns false (and changes nothing) when the
// machine's load cannot be read (no /proc/stat); `why` says so.
bool set_background(bool on, std::string* why = nullptr);
bool background();

// In background mode, samples the machine's load (at most every 200 ms) and
// sets active_threads to the cores other programs leave idle (at least 1).
// Does nothing otherwise. Cheap: call it before each step.
void adapt_to_machine_load();

// The pool's helpers stop polling for work and sleep until the next
// parallel_for (ThreadPool::rest): call when no parallel work follows soon,
// e.g. a worker that has answered a step and now waits for the network.
void rest_threads();

// Bits a thread carries into the chunks of its parallel_for, whichever
// threads run them: settings scoped to one run, such as ops/gemm.h's
// permission to use int8 activations. Opaque here.
uint32_t thread_flags();
void set_thread_flags(uint32_t flags);

// Clears `clear` and sets `bits` in this thread's flags until the scope ends.
class ThreadFlagsScope {
 public:
  explicit ThreadFlagsScope(uint32_t bits, uint32_t clear = 0) : saved_(thread_flags()) {
    set_thread_flags((saved_ & ~clear) | bits);
  }
  ~ThreadFlagsScope() { set_thread_flags(saved_); }
  ThreadFlagsScope(const ThreadFlagsScope&) = delete;
  ThreadFlagsScope& operator=(const ThreadFlagsScope&) = delete;

 private:
  uint32_t saved_;
};

// Calls fn(begin, end) on disjoint chunks covering [0, n). `grain` is the
// smallest chunk worth a thread; small jobs run inline. The chunks see the
// caller's thread_flags().
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace bonfire
