// add/sub/mul and rmsnorm on values large enough that parallel_for splits
// them, and splits a row-vector broadcast in the middle of a row: every
// element must equal the scalar expression (IEEE add and multiply round the
// same in a vector lane), and rmsnorm must equal a double-precision
// reference of the formula in docs/OPS.md. goldens/ops covers the small
// cases against PyTorch; these cover the chunking.
#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "op_test_util.h"

namespace bonfire {
namespace {

// 9 rows of 5003: 45027 values, chunked by 16384 and then into pieces
// that start inside rows; 5003 is no multiple of any vector width.
constexpr int64_t kRows = 9, kCols = 5003;

TEST(ElementwiseChunks, SameShapeRowVectorAndScalar) {
  const std::vector<float> a = randn(kRows * kCols, 1), b = randn(kRows * kCols, 2), row = randn(kCols, 3);
  const float s = 0.37f;
  struct Case {
    const char* op;
    float (*f)(float, float);
  };
  const Case cases[] = {{"add", [](float x, float y) { return x + y; }},
                        {"sub", [](float x, float y) { return x - y; }},
                        {"mul", [](float x, float y) { return x * y; }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const Tensor same = run_op(c.op, {make({kRows, kCols}, a), make({kRows, kCols}, b)}, json::object());
    const Tensor by_row = run_op(c.op, {make({kRows, kCols}, a), make({kCols}, row)}, json::object());
    const Tensor by_one = run_op(c.op, {make({kRows, kCols}, a), make({1}, {s})}, json::object());
    // The manifest's "row vector as wide as a" also in a's rank: [1, 1, C].
    const Tensor by_row3 = run_op(c.op, {make({3, 3, kCols}, a), make({1, 1, kCols}, row)}, json::object());
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      ASSERT_EQ(same.f32()[i], c.f(a[i], b[i])) << "same shape, element " << i;
      ASSERT_EQ(by_row.f32()[i], c.f(a[i], row[i % kCols])) << "row vector, element " << i;
      ASSERT_EQ(by_row3.f32()[i], c.f(a[i], row[i % kCols])) << "[1, 1, C], element " << i;
      ASSERT_EQ(by_one.f32()[i], c.f(a[i], s)) << "scalar, element " << i;
    }
  }
}

TEST(ElementwiseChunks, OutputMayBeAnInput) {
  // The executor may hand an op its input's buffer as the output.
  const std::vector<float> a = randn(kRows * kCols, 4), b = randn(kRows * kCols, 5);
  Tensor x = make({kRows, kCols}, a), y = make({kRows, kCols}, b);
  OpInputs in{&x, &y};
  find_op("mul")->run(in, Params(), x);
  for (int64_t i = 0; i < kRows * kCols; ++i) ASSERT_EQ(x.f32()[i], a[i] * b[i]) << "element " << i;
}

TEST(ElementwiseChunks, RmsnormRowsAcrossThreads) {
  const std::vector<float> x = randn(kRows * kCols, 6, 3.0f), g = randn(kCols, 7);
  const double eps = 1e-5;
  const float offset = 1.0f;
  const Tensor out =
      run_op("rmsnorm", {make({kRows, kCols}, x), make({kCols}, g)}, {{"eps", eps}, {"weightOffset", offset}});
  for (int64_t r = 0; r < kRows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < kCols; ++c) ss += (double)x[r * kCols + c] * x[r * kCols + c];
    const double inv = 1.0 / std::sqrt(ss / kCols + eps);
    for (int64_t c = 0; c < kCols; ++c) {
      const double want = x[r * kCols + c] * inv * (g[c] + offset);
      ASSERT_NEAR(out.f32()[r * kCols + c], want, 1e-6 * (1 + std::fabs(want))) << "row " << r << ", column " << c;
    }
  }
}

// Checks build their messages only on failure (ops/op.h): a failing one
// still says what was wrong, with the numbers.
TEST(ElementwiseChunks, LazyMessagesStillNameTheProblem) {
  const TensorDesc a{DType::F32, {kRows, kCols}}, b{DType::F32, {kRows, kCols + 1}};
  expect_bad_graph("add", {a, b}, json::object(), "b [9, 5004] must have a's shape [9, 5003]");
  expect_bad_graph("add", {a, TensorDesc{DType::F32, {1, 1, 1, kCols}}}, json::object(),
                   "b [1, 1, 1, 5003] must have a's shape [9, 5003]");  // more axes than a
  expect_bad_graph("rmsnorm", {a, TensorDesc{DType::F32, {kCols}}}, {{"groupSize", 7}},
                   "param groupSize 7 must divide the row width 5003");
  const TensorDesc q{DType::F32, {1, 64}}, kv{DType::F32, {4, 16}};
  expect_bad_graph("attention", {q, kv, kv}, {{"heads", 4}, {"headDim", 16}, {"kvHeads", 3}},
                   "param heads (4) must be a multiple of param kvHeads (3)");
  expect_bad_graph("rope", {q}, {{"headDim", 12}}, "the last axis of x (64) must be a multiple of param headDim 12");
}

}  // namespace
}  // namespace bonfire
