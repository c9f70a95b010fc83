// Matrix products over weights in any stored dtype. The weight is read row by
// row as stored (f32 through BLAS; f16, bf16 and every GGUF block type
// dequantized a tile at a time into a thread's scratch), never expanded whole. Work is split over the
// worker's threads; called from inside a parallel region it runs inline.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/threads.h"

namespace bonfire {

// `rows` consecutive rows of `cols` elements each, stored as `dtype`
// (row stride = row_bytes(dtype, cols)). A view into a weight tensor.
struct WeightRows {
  DType dtype = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // The same rows in ops/int8_gemm.h's packed panels (the panel holding the
  // first row), when the tensor has them and the rows start a panel.
  const uint8_t* panels = nullptr;
};

// Rows [first, first + count) of t viewed as 2-D [t.rows(), t.cols()].
WeightRows weight_rows(const Tensor& t, int64_t first, int64_t count);
inline WeightRows weight_rows(const Tensor& t) { return weight_rows(t, 0, t.rows()); }

// out[M, w.rows] = x[M, w.cols] · wᵀ (+ bias[w.rows] when given).
// `ldx` and `ldo` are the row strides of x and out in elements.
void gemm_nt(const float* x, int64_t M, int64_t ldx, const WeightRows& w, float* out, int64_t ldo,
             const float* bias = nullptr);

// Products of the same x with several weights at once (a layer's q, k and
// v projections; its gate and up): out[i][M, w[i].rows] = x · w[i]ᵀ, each
// out[i] dense. Where every weight runs on the tiled int8 kernel, x is
// quantized once and one split over the threads covers all their panels
// (the values are gemm_nt's: each output row depends only on its weight
// row and x); otherwise each runs through gemm_nt.
void gemm_nt_siblings(const float* x, int64_t M, int64_t ldx, const std::vector<WeightRows>& w,
                      const std::vector<float*>& out);

// Where q8_0 and q4_0 weights meet activations quantized to int8
// (ops/int8_dot.h) instead of f32. Only inside an Int8Scope: generation
// steps open one (llama.cpp computes the same way); a client's own graph call
// does not, so there the ops keep their f32 meaning (ops-v3.json). Within a
// scope, the mode decides:
// - Small (the default): products with fewer than 16 activation rows (decode
//   steps, short prompts), where streaming the weight and widening every
//   value to f32 is the cost; on CPUs with the tiled int8 kernel
//   (ops/int8_gemm.h: AVX-512 VNNI, or AVX2) products of any row count, since
//   there it beats f32 tiles through BLAS at every size (on a Zen 3, AVX2
//   only, a 128-token q8_0 prefill 1.74x llama.cpp's against 0.99x through
//   BLAS). Elsewhere (SSE4 and below) longer prefills keep f32 tiles.
// - Off (--exact): never; every product is f32 against the dequantized weight.
// - All: every product, to measure what int8 activations cost in accuracy
//   (docs/PERFORMANCE.md's perplexity figures).
enum class Int8Activations { Off, Small, All };
void set_int8_activations(Int8Activations mode);
Int8Activations int8_activations();

// Lets the products run on this thread (and in its parallel_for chunks)
// until the scope ends use int8 activations, as the mode permits.
class Int8Scope : ThreadFlagsScope {
 public:
  Int8Scope();
};

// Which products use int8 activations within an Int8Scope, as a rule a
// worker announces (hello "int8Rows") and a checker recomputing its steps
// must follow (net/verifier.h), since int8 and f32 activations differ by far
// more than f32 reassociation:
// - None: no product (--exact);
// - Few: products of fewer than 16 rows (Small on CPUs without the tiled
//   int8 kernel);
// - Any: every product (Small with the tiled kernel; All).
enum class Int8Rows { None, Few, Any };
// This process's rule for a weight with an int8 kernel, from the mode and
// the CPU.
Int8Rows int8_rows_rule();
const char* int8_rows_name(Int8Rows rule);  // "none", "few", "any"
bool parse_int8_rows(const std::string& name, Int8Rows* rule);

// Makes this thread's products (and its parallel_for chunks') follow `rule`
// instead of the process's until the scope ends. Still only within an
// Int8Scope.
class Int8RowsScope : ThreadFlagsScope {
 public:
  explicit Int8RowsScope(Int8Rows rule);
};

// In a batched call (graph/batch.h) each of the < 16 activation rows is
// dotted with the weight on its own, as in a one-row product, so a row's
// result does not depend on the rows beside it (BLAS would block them
// together and sum in another order). Streaming the weight once for all rows
// keeps the batch's gain.
class BatchRowsScope : ThreadFlagsScope {
 public:
  BatchRowsScope();
};

// out[M, w.cols] = x[M, w.rows] · w (+ bias[w.cols]).
void gemm_nn(const float* x, int64_t M, int64_t ldx, const WeightRows& w, float* out, int64_t ldo,
             const float* bias = nullptr);

}  // namespace bonfire
