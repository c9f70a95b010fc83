#include "core/rng.h"

namespace bonfire {

namespace {

// Multipliers and Weyl key increments of Random123's philox4x64.
constexpr uint64_t kM0 = 0xD2E7470EE14C6C93ull;
constexpr uint64_t kM1 = 0xCA5A826395121157ull;
constexpr uint64_t kW0 = 0x9E3779B97F4A7C15ull;  // golden ratio
constexpr uint64_t kW1 = 0xBB67AE8584CAA73Bull;  // sqrt(3) - 1

inline void mulhilo(uint64_t a, uint64_t b, uint64_t* hi, uint64_t* lo) {
  const unsigned __int128 p = (unsigned __int128)a * b;
  *hi = (uint64_t)(p >> 64);
  *lo = (uint64_t)p;
}

}  // namespace

PhiloxCounter philox4x64_10(PhiloxCounter c, PhiloxKey k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped between rounds, not before the first
      k[0] += kW0;
      k[1] += kW1;
    }
    uint64_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], &hi0, &lo0);
    mulhilo(kM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

uint64_t philox_first(uint64_t seed, uint64_t step, uint64_t row) {
  // numpy's counter increment: +1 on word 0, carrying into the higher words.
  PhiloxCounter ctr = {step + 1, row, 0, 0};
  if (ctr[0] == 0 && ++ctr[1] == 0) ++ctr[2];
  return philox4x64_10(ctr, {seed, 0})[0];
}

double uniform01(uint64_t seed, uint64_t step, uint64_t row) {
  return (double)(philox_first(seed, step, row) >> 11) * 0x1.0p-53;
}

}  // namespace bonfire
