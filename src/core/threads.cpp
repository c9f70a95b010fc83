#include "core/threads.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

namespace bonfire {

namespace {
int g_threads = 0;
}

void set_num_threads(int n) {
  // No count given: all cores, unless OMP_NUM_THREADS says otherwise (the
  // ThreadSanitizer run sets 1: libgomp's own synchronisation is invisible to it).
  if (n <= 0) n = std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads() : omp_get_num_procs();
  g_threads = n;
  omp_set_num_threads(g_threads);
}

int num_threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t threads = std::min<int64_t>(num_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (threads <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  // More chunks than threads so uneven rows (e.g. causal attention) balance.
  const int64_t chunks = std::min<int64_t>(n, threads * 4);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e) fn(b, e);
  }
}

}  // namespace bonfire
