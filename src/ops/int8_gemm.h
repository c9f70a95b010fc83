// A tiled product of q8_0, q4_0, q4_k, q5_k and q6_k weights with
// int8-quantized activations (ops/int8_dot.h's ActBlock rows) for CPUs with
// AVX-512 VNNI, where one instruction sums 64 byte products, and for CPUs
// with AVX2 (int8_gemm_avx2-inl.h: the same panels and the same bits, two
// multiply-adds per 32 products). Prefill is where it pays: the weight
// streams once per panel of 32 rows, and each panel meets many activation
// rows in registers (llama.cpp's repacked q8_0/q4_0 GEMMs work the same way).
//
// Layout, per panel of 16 weight rows: each block of 32 values is repacked
// on the fly so that one 512-bit register holds 4 consecutive bytes of each
// of the 16 rows. A vector lane is then one output row, and the block's
// integer dot is exact in that lane before it meets the scales.
//
// The promise the rest of the engine builds on: every output is computed as
//     acc = 0;  for each block b in order:  acc = fma(float(dot_b), dw_b * dx_b, acc)
//     out = acc + bias
// with dot_b the exact integer sum of the block's 32 products. (The
// k-quants keep a second sum, added at the end: q4_k's sub-block mins, and
// q6_k's odd 16-value sub-blocks, each with its own scale; see
// reference_int8_gemm.) So a row's result does not depend on how many rows
// are computed with it (a batch, a prefill chunk, a verifier's recomputation
// all agree bit for bit), and reference_int8_gemm below reproduces it exactly.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "ops/int8_dot.h"

namespace bonfire::simd {

// True when this CPU runs the tiled kernel (the AVX-512 VNNI, AVX3 or AVX2
// target chosen by Highway's dispatch) for this weight format and row length
// (q8_0 or q4_0 with K % 32 == 0; q4_k, q5_k or q6_k with K % 256 == 0).
bool int8_gemm_available(DType weight, int64_t k);

// 128 × the sum of each block's 32 values, for x[m * blocks + b]: the kernel
// multiplies weights shifted to unsigned bytes (w + 128) and subtracts this.
void int8_block_sums(const ActBlock* x, int64_t count, int32_t* sums);

// out[m * ldo + n] for m < M, n < N: weight rows w[n] (any of the above, K
// values, `stride` bytes apart) against activation rows x[m * K/32 ...],
// plus bias[n] when given. Requires int8_gemm_available(weight, K).
struct Int8Rows {
  const ActBlock* blocks = nullptr;  // M × K/32
  const int32_t* sums = nullptr;     // int8_block_sums of blocks
  int64_t rows = 0;                  // M
};
void int8_gemm(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, const Int8Rows& x, float* out,
               int64_t ldo, const float* bias);

// Weights repacked once (at load) into the kernel's panel layout, so a
// decode step streams one sequential run of bytes and does no transposing.
// Panel p (rows 16p..16p+15; rows past N repeat the last) takes
// int8_panel_stride bytes at p * int8_panel_stride, 64-byte aligned: 34
// bytes per 32 q8_0 values and 18 per 32 q4_0 values, as in the file (q4_0's
// panels keep the nibbles, and every panel the f16 scales), plus padding to
// 64 bytes when K / 32 is odd. q4_k and q6_k panels take 2432 and 3392
// bytes per 256 values (ops/int8_gemm_kquants-inl.h has their layouts).
int64_t int8_panel_stride(DType weight, int64_t k);
int64_t int8_packed_bytes(DType weight, int64_t n, int64_t k);
// Packs panels [first, last) of w (rows as in int8_gemm) into out + first *
// int8_panel_stride(K). Requires int8_gemm_available(weight, K).
void int8_pack(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, int64_t first, int64_t last,
               uint8_t* out);
// int8_gemm against packed panels: `panels` is the panel holding row 0 of
// the N rows wanted. The same bits as int8_gemm.
void int8_gemm_packed(DType weight, const uint8_t* panels, int64_t N, int64_t K, const Int8Rows& x, float* out,
                      int64_t ldo, const float* bias);

// Per-call sums the k-quant tiles of every target take, from x's `count`
// blocks and their int8_block_sums, in this thread's buffer (valid until the
// thread's next call): int8_k4_mins' [i] = -(dx · Σx) of block i (q4_k and
// q5_k's mins); int8_k6_half_sums' [2i], [2i + 1] = 32 × the sums of block
// i's values 0..15 and 16..31 (q6_k's offset of 32).
const float* int8_k4_mins(const ActBlock* x, const int32_t* sums, int64_t count);
const int32_t* int8_k6_half_sums(const ActBlock* x, int64_t count);

// The same arithmetic in plain C++ on any CPU: the tests hold int8_gemm to it bit for bit.
void reference_int8_gemm(DType weight, const uint8_t* w, int64_t stride, int64_t N, int64_t K, const ActBlock* x,
                         int64_t M, float* out, int64_t ldo, const float* bias);

}  // namespace bonfire::simd
