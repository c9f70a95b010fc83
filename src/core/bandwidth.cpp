#include "core/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "core/threads.h"

namespace bonfire {

double measure_read_bandwidth(int64_t bytes, int reps) {
  std::vector<uint64_t> buf(static_cast<size_t>(bytes / 8));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  // Each chunk's sum goes here so the reads are not optimized away; atomic,
  // since every thread of the pool adds to it.
  std::atomic<uint64_t> sink{0};
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for(static_cast<int64_t>(buf.size()), 1 << 16, [&](int64_t b, int64_t e) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      for (; i < e; ++i) s0 += buf[i];
      sink.fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
    });
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(buf.size()) * 8 / best;
}

}  // namespace bonfire
