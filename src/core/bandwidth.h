// The machine's memory read bandwidth, measured: the ceiling every
// decode-speed figure is compared against (a decode step reads each weight
// once, so tokens/s can be at most bandwidth / bytes read per token).
#pragma once
#include <cstdint>

namespace bonfire {

// Bytes per second when the worker's threads sum a buffer of `bytes` (past
// every cache), best of `reps` passes.
double measure_read_bandwidth(int64_t bytes = int64_t(256) << 20, int reps = 5);

}  // namespace bonfire
