// Weight rows against activations quantized to int8, the way llama.cpp runs
// its q8_0 and q4_0 matrix-vector products: one integer multiply-add per pair
// of bytes instead of widening every weight to f32. The activation row is
// quantized once per product (per 32 values: scale = max|x| / 127, values
// rounded to nearest), then every weight row is dotted with it.
//
// The instruction set is chosen at run time (Highway's dispatch, like
// ops/simd.h): AVX2's byte multiply-add where the CPU has it (also on the
// AVX-512 targets, which include AVX2), portable integer code elsewhere.
// Every target computes the same integer sums, so results agree across
// targets up to the order of the float accumulation.
//
// Accuracy: the activations lose what int8 cannot hold (about 0.4% of a
// block's largest value per element). ops/precision.h switches this path off
// (--exact); docs/PERFORMANCE.md has the perplexity figures.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace bonfire::simd {

// One quantized block of 32 activations. The scale stays f32 (ggml keeps an
// f16 one): it costs nothing here and keeps the error to the rounding.
struct ActBlock {
  float d;
  int8_t qs[32];
};

// True for the weight formats dot_int8 handles (q8_0, q4_0; q4_k, q5_k and
// q6_k, the k-quant mixes such as llama.cpp's q4_k_m) at row length n.
bool int8_dot_supported(DType weight, int64_t n);
// q4_k and q5_k take off each sub-block's min times the activation block's
// sum, so their dots need activation_sums of x.
bool int8_dot_needs_sums(DType weight);
void activation_sums(const ActBlock* x, int64_t count, int32_t* sums);

// x[n] → n / 32 blocks (n a multiple of 32). False, with `out` unusable,
// when x holds a NaN or an infinity: int8 cannot carry them, so the caller
// takes the f32 path and the non-finite value propagates as it should.
bool quantize_activations(const float* x, int64_t n, ActBlock* out);

// Dot of one weight row (n values) with quantized activations; `sums` is
// activation_sums of x where int8_dot_needs_sums(weight), else unused.
float dot_int8(DType weight, const void* row, const ActBlock* x, int64_t n, const int32_t* sums = nullptr);

// One weight row against M activation rows (row m's n / 32 blocks at
// x + m * n / 32, its sums likewise): out[m * ldo] is dot_int8 of row m, to
// the bit. A q6_k row is unpacked once for all M.
void dot_int8_rows(DType weight, const void* row, const ActBlock* x, int64_t n, int64_t M, float* out, int64_t ldo,
                   const int32_t* sums = nullptr);

// "avx2" or "portable": the code dot_int8 runs on the target chosen now.
const char* int8_dot_path();

}  // namespace bonfire::simd
