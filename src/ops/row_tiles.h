// Register tiles of activation rows for the panel kernels (ops/int8_gemm.h,
// ops/half_gemm.h): a kernel is a template on its row count MR, so M rows run
// as tiles of kMax (4 unless a kernel takes wider ones) and one tile of the
// 1 to kMax - 1 left over.
#pragma once
#include <cstdint>
#include <type_traits>

namespace bonfire::simd {

constexpr int kTileRows = 4;

namespace detail {
template <int R, typename Tile>
inline void last_row_tile(int64_t rest, int64_t m, Tile& tile) {
  if constexpr (R > 0) {
    if (rest == R)
      tile(std::integral_constant<int, R>{}, m);
    else
      last_row_tile<R - 1>(rest, m, tile);
  }
}
}  // namespace detail

// tile(std::integral_constant<int, MR>{}, first_row) for each tile of [0, M).
template <int kMax = kTileRows, typename Tile>
inline void for_row_tiles(int64_t M, Tile&& tile) {
  int64_t m = 0;
  for (; m + kMax <= M; m += kMax) tile(std::integral_constant<int, kMax>{}, m);
  detail::last_row_tile<kMax - 1>(M - m, m, tile);
}

// for_row_tiles with a third argument, std::true_type for the first tile and
// std::false_type for the rest: the first tile over a panel streams it from
// memory (and prefetches), later ones find it in cache.
template <int kMax = kTileRows, typename Tile>
inline void for_row_tiles_first(int64_t M, Tile&& tile) {
  for_row_tiles<kMax>(M, [&](auto mr, int64_t m) {
    if (m == 0)
      tile(mr, m, std::true_type{});
    else
      tile(mr, m, std::false_type{});
  });
}

}  // namespace bonfire::simd
