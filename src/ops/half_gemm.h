// Products of f16 / bf16 weights with f32 activations on AVX-512 CPUs, from
// weights repacked at load into panels of 16 rows (the layout of
// ops/int8_gemm.h, one value per lane): a vector lane is an output row, so
// each step widens 16 rows' values at one k and multiplies them by one
// broadcast activation. OpenBLAS (which the f32 path uses) runs its Haswell
// kernels on CPUs it does not know, such as Zen 5; this runs 512-bit ones.
//
// The promise: every output is
//     acc = 0;  for k in order:  acc = fma(float(w[n][k]), x[m][k], acc)
//     out = acc + bias
// so, as with the int8 kernel, a row's result does not depend on the rows
// computed beside it, and reference_half_gemm reproduces it bit for bit.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace bonfire::simd {

// True when this CPU runs the kernel (AVX-512) for f16 or bf16 weights.
bool half_gemm_available(DType weight);

// Panel p (rows 16p..16p+15; rows past N repeat the last) takes
// half_panel_stride(K) bytes at p * half_panel_stride(K): for each k, the 16
// rows' values (2 bytes each).
int64_t half_panel_stride(int64_t k);
int64_t half_packed_bytes(int64_t n, int64_t k);
// Packs panels [first, last) of w ([N, K] rows of f16 or bf16, `stride` bytes apart).
void half_pack(const uint8_t* w, int64_t stride, int64_t N, int64_t K, int64_t first, int64_t last, uint8_t* out);

// out[m * ldo + n] for m < M, n < N, against the packed panels starting at
// the one holding row 0 of the N wanted; plus bias[n] when given.
void half_gemm_packed(DType weight, const uint8_t* panels, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx,
                      float* out, int64_t ldo, const float* bias);

// The same arithmetic in plain C++ from the unpacked rows: the tests hold the kernel to it.
void reference_half_gemm(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, const float* x,
                         int64_t M, int64_t ldx, float* out, int64_t ldo, const float* bias);

}  // namespace bonfire::simd
