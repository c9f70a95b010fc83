#include "core/threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/machine_load.h"
#include "core/thread_pool.h"

namespace bonfire {

namespace {

std::unique_ptr<ThreadPool> g_pool;
std::once_flag g_pool_once;
std::atomic<int> g_active{0};
std::atomic<bool> g_background{false};
std::atomic<uint64_t> g_background_epoch{0};  // bumps on every change of mode
thread_local uint64_t t_background_epoch = 0;  // the mode this thread last took
thread_local uint32_t t_flags = 0;

std::mutex g_load_mutex;
MachineLoad g_load;
std::chrono::steady_clock::time_point g_last_sample{};

ThreadPool& pool() {
  std::call_once(g_pool_once, [] {
    g_pool = std::make_unique<ThreadPool>(available_cores());
    g_active = g_pool->size();
  });
  return *g_pool;
}

// A thread that calls parallel_for takes the background mode's priority, so
// the step thread (not only the helpers) yields to the volunteer's programs.
void follow_background_mode() {
  const uint64_t epoch = g_background_epoch.load(std::memory_order_relaxed);
  if (t_background_epoch == epoch) return;
  t_background_epoch = epoch;
  ThreadPool::set_thread_background(ThreadPool::current_tid(), g_background);
}

}  // namespace

int available_cores() {
#ifndef __EMSCRIPTEN__  // a browser tells only navigator.hardwareConcurrency
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

int checked_thread_count(int requested, std::string* warning) {
  const int cores = available_cores();
  if (requested < 1)
    throw std::invalid_argument("--threads must be at least 1 (got " + std::to_string(requested) +
                                "; leave it out to use all " + std::to_string(cores) + " cores)");
  if (requested > cores) {
    if (warning)
      *warning = "--threads " + std::to_string(requested) + " is more than the " + std::to_string(cores) +
                 " cores this process may use; using " + std::to_string(cores);
    return cores;
  }
  return requested;
}

void set_num_threads(int n) {
  if (n <= 0) n = available_cores();
  pool();  // the once-flag is spent either way
  if (g_pool->size() != n) {
    g_pool.reset();
    g_pool = std::make_unique<ThreadPool>(n);
    if (g_background) g_pool->set_background(true);
  }
  g_active = n;
}

int num_threads() { return pool().size(); }
void rest_threads() { pool().rest(); }
int active_threads() {
  pool();
  return g_active.load(std::memory_order_relaxed);
}

bool set_background(bool on, std::string* why) {
  if (on && !MachineLoad().readable()) {
    if (why) *why = "the machine's load cannot be read (/proc/stat), so background mode cannot adapt";
    return false;
  }
  pool().set_background(on);
  g_background = on;
  g_background_epoch.fetch_add(1);
  if (!on) g_active = g_pool->size();
  return true;
}

bool background() { return g_background; }

void adapt_to_machine_load() {
  if (!g_background) return;
  std::lock_guard<std::mutex> lock(g_load_mutex);
  const auto now = std::chrono::steady_clock::now();
  if (now - g_last_sample < std::chrono::milliseconds(200)) return;
  g_last_sample = now;
  const auto others = g_load.other_busy_cores();
  if (!others) return;
  const int size = pool().size();
  const double idle = static_cast<double>(available_cores()) - *others;
  g_active = std::clamp(static_cast<int>(idle + 0.5), 1, size);
}

uint32_t thread_flags() { return t_flags; }
void set_thread_flags(uint32_t flags) { t_flags = flags; }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  ThreadPool& p = pool();
  const bool nested = ThreadPool::in_job();
  if (!nested) follow_background_mode();
  const int64_t width = std::min<int64_t>(g_active.load(std::memory_order_relaxed),
                                          (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (width <= 1 || nested) {
    fn(0, n);
    return;
  }
  // More chunks than threads: uneven rows (causal attention) balance, and a
  // thread the OS preempts holds up only a small piece.
  const int64_t chunks = std::min<int64_t>(n, width * 8);
  const uint32_t flags = t_flags;
  p.run(chunks, static_cast<int>(width), [&](int64_t c) {
    const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b >= e) return;
    const uint32_t saved = t_flags;
    t_flags = flags;
    fn(b, e);
    t_flags = saved;
  });
}

}  // namespace bonfire
