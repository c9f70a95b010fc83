// Register tiles of activation rows for the panel kernels (ops/int8_gemm.h,
// ops/half_gemm.h): a kernel is a template on its row count MR, so M rows run
// as tiles of 4 and one tile of the 1 to 3 left over.
#pragma once
#include <cstdint>
#include <type_traits>

namespace bonfire::simd {

constexpr int kTileRows = 4;

// tile(std::integral_constant<int, MR>{}, first_row) for each tile of [0, M).
template <typename Tile>
inline void for_row_tiles(int64_t M, Tile&& tile) {
  int64_t m = 0;
  for (; m + kTileRows <= M; m += kTileRows) tile(std::integral_constant<int, kTileRows>{}, m);
  switch (M - m) {
    case 3: tile(std::integral_constant<int, 3>{}, m); break;
    case 2: tile(std::integral_constant<int, 2>{}, m); break;
    case 1: tile(std::integral_constant<int, 1>{}, m); break;
    default: break;
  }
}

}  // namespace bonfire::simd
