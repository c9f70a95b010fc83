// The one way work is split over a worker's threads. OpenMP underneath; ops
// call parallel_for and never start threads of their own.
#pragma once
#include <cstdint>
#include <functional>

namespace bonfire {

void set_num_threads(int n);  // 0 = all cores
int num_threads();

// Calls fn(begin, end) on disjoint chunks covering [0, n). `grain` is the
// smallest chunk worth a thread; small jobs run inline.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace bonfire
