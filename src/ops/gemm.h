// Matrix products over weights in any stored dtype. The weight is read row by
// row as stored (f32 through BLAS; f16, bf16 and every GGUF block type
// dequantized a tile at a time into a thread's scratch), never expanded whole. Work is split over the
// worker's threads; called from inside a parallel region it runs inline.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace bonfire {

// `rows` consecutive rows of `cols` elements each, stored as `dtype`
// (row stride = row_bytes(dtype, cols)). A view into a weight tensor.
struct WeightRows {
  DType dtype = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Rows [first, first + count) of t viewed as 2-D [t.rows(), t.cols()].
WeightRows weight_rows(const Tensor& t, int64_t first, int64_t count);
inline WeightRows weight_rows(const Tensor& t) { return weight_rows(t, 0, t.rows()); }

// out[M, w.rows] = x[M, w.cols] · wᵀ (+ bias[w.rows] when given).
// `ldx` and `ldo` are the row strides of x and out in elements.
void gemm_nt(const float* x, int64_t M, int64_t ldx, const WeightRows& w, float* out, int64_t ldo,
             const float* bias = nullptr);

// out[M, w.cols] = x[M, w.rows] · w (+ bias[w.cols]).
void gemm_nn(const float* x, int64_t M, int64_t ldx, const WeightRows& w, float* out, int64_t ldo,
             const float* bias = nullptr);

}  // namespace bonfire
