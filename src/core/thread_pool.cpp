#include "core/thread_pool.h"

#include <sys/resource.h>
#include <unistd.h>
#ifdef __EMSCRIPTEN__
#include <emscripten/threading.h>
#else
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <climits>
#include <cmath>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace bonfire {

namespace {

thread_local bool t_in_job = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

using Clock = std::chrono::steady_clock;

// Polls `ready` until it returns true or `spin_us` passes; true if it did.
// The clock is read every 64 polls: a pause is ~10-140 cycles.
template <typename Ready>
bool spin_until(Ready ready, int spin_us) {
  if (ready()) return true;
  if (spin_us <= 0) return false;
  const auto deadline = Clock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      cpu_relax();
      if (ready()) return true;
    }
    if (Clock::now() >= deadline) return false;
  }
}

// Sleep until `a` no longer holds `seen`, and wake such sleepers. C++20's
// atomic wait is a futex on Linux; emscripten's libc++ implements it by
// polling with growing sleeps, which cost the browser worker milliseconds a
// step, so there it is Atomics.wait/notify directly.
#ifdef __EMSCRIPTEN__
void wait_while(std::atomic<uint32_t>& a, uint32_t seen) {
  emscripten_futex_wait(reinterpret_cast<volatile void*>(&a), seen, INFINITY);
}
void wake_all(std::atomic<uint32_t>& a) { emscripten_futex_wake(reinterpret_cast<volatile void*>(&a), INT_MAX); }
#else
void wait_while(std::atomic<uint32_t>& a, uint32_t seen) { a.wait(seen); }
void wake_all(std::atomic<uint32_t>& a) { a.notify_all(); }
#endif

constexpr uint64_t kMaxChunks = 0xFFFF;

uint64_t pack(uint32_t epoch, uint64_t next, uint64_t chunks) {
  return (static_cast<uint64_t>(epoch) << 32) | (next << 16) | chunks;
}

}  // namespace

int ThreadPool::current_tid() {
#ifdef __EMSCRIPTEN__
  return 0;  // a Web Worker has no OS thread id, nor a priority to set
#else
  return static_cast<int>(::syscall(SYS_gettid));
#endif
}

void ThreadPool::set_thread_background(int tid, bool on) {
  if (tid == 0) return;
  // nice 19 rather than SCHED_IDLE: an idle-class thread starves beside any
  // other niced program (an indexer, a backup), and nice 19 already leaves a
  // normal program sharing the core ~98.5% of it.
  setpriority(PRIO_PROCESS, static_cast<id_t>(tid), on ? 19 : 0);
}

bool ThreadPool::in_job() { return t_in_job; }

ThreadPool::ThreadPool(int threads, int spin_us) : spin_us_(std::max(0, spin_us)) {
  const int helpers = std::max(0, threads - 1);
  helper_tids_.assign(helpers, 0);
  std::atomic<int> started{0};
  // A helper counts jobs from the pool's first epoch, not from whatever
  // epoch it reads once it runs: a helper scheduled late would otherwise
  // take a job announced before it looked (or the destructor's stop) as
  // already seen, and sleep through it. The destructor then waited on it
  // forever (ThreadPool.NestedRunsInline hung in a fresh clone's run, and
  // twice in 300 runs alone; the cause is inferred from gdb, not proven).
  const uint32_t first = epoch_.load();
  for (int i = 0; i < helpers; ++i)
    helpers_.emplace_back([this, i, first, &started] {
      helper_tids_[i] = current_tid();
      started.fetch_add(1);
      helper_main(i, first);
    });
  while (started.load() < helpers) std::this_thread::yield();
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  wake_all(epoch_);
  for (auto& t : helpers_) t.join();
}

void ThreadPool::rest() { resting_.store(true, std::memory_order_relaxed); }

void ThreadPool::set_background(bool on) {
  for (int tid : helper_tids_) set_thread_background(tid, on);
}

void ThreadPool::helper_main(int index, uint32_t seen) {
  t_in_job = true;  // a parallel_for inside a chunk runs inline
  for (;;) {
    // Poll for the next job; a rest() ends the polling at once.
    auto next_job = [&] { return epoch_.load(std::memory_order_acquire) != seen; };
    const bool job =
        spin_until([&] { return next_job() || resting_.load(std::memory_order_relaxed); }, spin_us_) && next_job();
    if (!job) {
      // Announce the sleep before re-checking, so a job published in between
      // either is seen here or sees this sleeper and wakes it.
      sleepers_.fetch_add(1);
      while (epoch_.load() == seen) wait_while(epoch_, seen);
      sleepers_.fetch_sub(1);
    }
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    if (index < width_.load(std::memory_order_acquire) - 1) work(seen);
  }
}

bool ThreadPool::claim(uint32_t epoch, int64_t* chunk) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t e = static_cast<uint32_t>(t >> 32);
    const uint64_t next = (t >> 16) & kMaxChunks, chunks = t & kMaxChunks;
    if (e != epoch || next >= chunks) return false;
    if (ticket_.compare_exchange_weak(t, pack(e, next + 1, chunks), std::memory_order_acq_rel)) {
      *chunk = static_cast<int64_t>(next);
      return true;
    }
  }
}

void ThreadPool::run_chunk(int64_t chunk) {
  try {
    (*fn_)(chunk);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
  if (pending_.fetch_sub(1) == 1 && caller_asleep_.load()) wake_all(pending_);
}

void ThreadPool::work(uint32_t epoch) {
  int64_t chunk;
  while (claim(epoch, &chunk)) run_chunk(chunk);
}

void ThreadPool::run(int64_t chunks, int width, const std::function<void(int64_t)>& fn) {
  if (chunks <= 0) return;
  width = std::clamp(width, 1, size());
  std::unique_lock<std::mutex> lock(job_mutex_, std::defer_lock);
  if (width == 1 || chunks == 1 || t_in_job || !lock.try_lock()) {
    for (int64_t c = 0; c < chunks; ++c) fn(c);
    return;
  }
  for (int64_t base = 0; base < chunks; base += kMaxChunks) {
    const int64_t count = std::min<int64_t>(kMaxChunks, chunks - base);
    const std::function<void(int64_t)> shifted = [&](int64_t c) { fn(base + c); };
    fn_ = base == 0 && count == chunks ? &fn : &shifted;
    width_.store(width, std::memory_order_relaxed);
    pending_.store(static_cast<uint32_t>(count), std::memory_order_relaxed);
    const uint32_t epoch = epoch_.load() + 1;
    resting_.store(false, std::memory_order_relaxed);
    ticket_.store(pack(epoch, 0, static_cast<uint64_t>(count)), std::memory_order_release);
    epoch_.store(epoch);
    if (sleepers_.load() > 0) wake_all(epoch_);

    t_in_job = true;
    work(epoch);
    t_in_job = false;
    // The rest are on helpers: poll briefly, then sleep until the last one
    // finishes (a descheduled helper may take milliseconds).
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; }, spin_us_)) {
      caller_asleep_.store(true);
      for (uint32_t p; (p = pending_.load()) != 0;) wait_while(pending_, p);
      caller_asleep_.store(false);
    }
    fn_ = nullptr;
  }
  if (error_) {
    std::exception_ptr e;
    std::swap(e, error_);
    std::rethrow_exception(e);
  }
}

}  // namespace bonfire
