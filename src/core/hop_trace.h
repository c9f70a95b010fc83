// A timestamp at each hand-off a generation step crosses (coordinator,
// link, worker), for finding where the time between a worker's answer and
// the next step goes. Off unless BONFIRE_HOP_TRACE is set; then each point
// writes "HOP <point> <steady-clock µs> <thread id>" to stderr (serve and
// its local worker share one clock; the thread tells concurrent
// generations' points apart). scripts/hop_trace.py turns a run's lines into
// the median time of each hop (docs/PERFORMANCE.md).
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace bonfire {

inline void hop_trace(const char* point) {
  static const bool on = std::getenv("BONFIRE_HOP_TRACE") != nullptr;
  if (!on) return;
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "HOP %s %lld %d\n", point, static_cast<long long>(us), static_cast<int>(gettid()));
}

}  // namespace bonfire
