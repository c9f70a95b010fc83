// Vector primitives with the instruction set chosen at run time (Highway's
// dynamic dispatch): the build targets baseline x86-64 and still uses AVX2 or
// AVX-512 where the CPU has them.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace bonfire::simd {

float dot_f32(const float* a, const float* b, int64_t n);
// y += a * x
void axpy_f32(float a, const float* x, float* y, int64_t n);
// y *= a
void scale_f32(float a, float* y, int64_t n);
// o[i] = a[i] (op) b[i], or a[i] (op) b[0] for every i when b_scalar; o may
// be a or b. Rounded as the scalar expression is.
enum class Binary { Add = 0, Sub = 1, Mul = 2 };
void binary_f32(Binary op, const float* a, const float* b, bool b_scalar, float* o, int64_t n);
// o[i] = (x[i] * s) * (g[i] + offset): a normalised row times its gain.
void scale_gain_f32(const float* x, float s, const float* g, float offset, float* o, int64_t n);
// Rotary pairs (i, i + half) of one head: o[i] = x[i] cs[i] - x[i+half]
// sn[i], o[i+half] = x[i+half] cs[i] + x[i] sn[i], each product rounded
// before the sum. o may not overlap x.
void rotate_halves(const float* x, const float* cs, const float* sn, int64_t half, float* o);
// The sum of x[i]^2 for i < n, each square and the sum in double (in
// lane-parallel order: a norm's statistic to double precision).
double sum_squares_f64(const float* x, int64_t n);
// out[i] = dot(q, k + i * stride, d) for i < n: one dispatch for a tile of
// attention keys instead of one per key. Summed in another order than
// dot_f32, but each out[i] depends on its own row only (the same bits
// whichever keys come with it).
void dot_rows(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float* out);
// For each head h < heads: acc_h[0, d) += sum over i < n of w_h[i] *
// v[i * stride, + d), with w_h = w + h * w_stride and acc_h = acc + h *
// acc_stride: a tile of attention values weighted by each head's
// probabilities (w_h[i] == 0 skipped). Each element of acc_h gets
// fma(w_h[i], v, acc) in row order, whatever `heads` is; heads that share
// the rows (grouped-query attention) load each row once per pair.
void weighted_rows(const float* w, int64_t w_stride, int64_t heads, const float* v, int64_t stride, int64_t n,
                   int64_t d, float* acc, int64_t acc_stride);
// x[i] = exp(x[i] - shift) for i < n, vectorized (within 2 ulp of std::exp;
// -inf gives 0), and returns their sum: a tile of attention scores to
// softmax weights.
double exp_shifted(float* x, int64_t n, float shift);
// w[i] = exp(((double)v[i] - mx) / temperature) for i < n, vectorized in
// double (within 1 ulp of std::exp; std::exp itself where Highway has no
// f64 vectors), and 1 where v[i] == mx (+inf too):
// a row of logits, all <= mx, to unnormalised softmax weights.
void softmax_weights_f64(const float* v, int64_t n, float mx, double temperature, double* w);
// x[i] *= scale for i < n; returns the largest and sets *nan when one is NaN
// (a tile of attention scores, scaled).
float scale_max(float* x, int64_t n, float scale, bool* nan);
// out[i] = sigmoid(alpha * x[i]), multiplied by x[i] when times_x (silu,
// gelu_quick), vectorized: within a few ulp of 1 / (1 + exp(-alpha x)).
// out may be x.
void sigmoid_f32(const float* x, float* out, int64_t n, float alpha, bool times_x);
// Dot of an f32 vector with a row stored as `t` (n a multiple of its block).
float dot_row(DType t, const void* row, const float* x, int64_t n);
// A row of `t` to f32, vectorized for f16, bf16 and q8_0 (same values as
// bonfire::dequantize_row).
void dequantize_row(DType t, const void* row, float* out, int64_t n);

// The SIMD target the kernels run on: the best this CPU and the build
// support, unless limited. limit_simd_target("sse4") makes every kernel
// use that target or a lesser one from then on (an honest worker on another
// target is how tests show the verifier's tolerance holds; docs/NETWORK.md).
// Names: avx3 (AVX-512), avx2, sse4, ssse3, emu128. Returns false with
// `why` set for an unknown name. Call before any kernel runs.
bool limit_simd_target(const std::string& name, std::string* why);
std::string simd_target();

}  // namespace bonfire::simd
