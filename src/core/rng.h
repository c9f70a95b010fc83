// Counter-based random numbers for sampling. A draw is a pure function of
// (seed, step, row), so it never depends on threads, batching or the worker
// that runs it, and any client can reproduce it with numpy:
//
//   numpy.random.Philox(key=[seed, 0], counter=[step, row, 0, 0]).random_raw()
//
// is philox_first(seed, step, row) (pass key and counter as uint64 arrays for
// values >= 2^63).
#pragma once
#include <array>
#include <cstdint>

namespace bonfire {

using PhiloxCounter = std::array<uint64_t, 4>;
using PhiloxKey = std::array<uint64_t, 2>;

// One block of Philox4x64-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the variant numpy ships as `Philox`.
PhiloxCounter philox4x64_10(PhiloxCounter ctr, PhiloxKey key);

// The first value numpy's Philox bit generator returns for key [seed, 0] and
// counter [step, row, 0, 0]. numpy increments the 256-bit counter before it
// generates a block, so this is word 0 of the block at counter + 1.
uint64_t philox_first(uint64_t seed, uint64_t step, uint64_t row);

// philox_first scaled into [0, 1) as numpy's random() does: (x >> 11) * 2^-53.
double uniform01(uint64_t seed, uint64_t step, uint64_t row);

}  // namespace bonfire
