// ring_attention (ops/ring_attention.cpp): a sliding-window layer's cache as
// a ring of R rows. Held to the attention op over the whole history with the
// same window, step by step across many wraps of the ring, for prefills
// longer than the ring, single-token steps and uneven chunks: the same keys
// are seen, so the outputs agree up to the order of the f32 sums.
#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"

namespace bonfire {
namespace {

struct RingCase {
  int64_t heads, kv_heads, head_dim, window, ring;
  std::vector<int64_t> steps;  // tokens per call
  double softcap = 0;
  bool alibi = false;
};

void check_ring(const RingCase& rc) {
  const int64_t H = rc.heads, KV = rc.kv_heads, D = rc.head_dim, kw = KV * D;
  int64_t total = 0;
  for (int64_t t : rc.steps) total += t;
  const std::vector<float> qs = randn(total * H * D, 1), ks = randn(total * kw, 2), vs = randn(total * kw, 3);
  Tensor k_ring = Tensor::zeros({rc.ring, kw}), v_ring = Tensor::zeros({rc.ring, kw});
  int64_t pos = 0;
  double worst = 0;
  for (int64_t T : rc.steps) {
    json p = {{"heads", H}, {"headDim", D}, {"kvHeads", KV}, {"posOffset", pos}, {"window", rc.window}};
    if (rc.softcap > 0) p["softcap"] = rc.softcap;
    if (rc.alibi) p["alibi"] = true;
    auto rows = [&](const std::vector<float>& all, int64_t from, int64_t n, int64_t w) {
      return make({n, w}, std::vector<float>(all.begin() + from * w, all.begin() + (from + n) * w));
    };
    const Tensor q = rows(qs, pos, T, H * D);
    // The reference: attention over every position so far, the same window.
    const Tensor want = run_op("attention", {q, rows(ks, 0, pos + T, kw), rows(vs, 0, pos + T, kw)}, p);
    // The ring: advanced in place by the op.
    const OpDef* op = find_op("ring_attention");
    Tensor q2 = q, k = rows(ks, pos, T, kw), v = rows(vs, pos, T, kw);
    OpInputs in = {&q2, &k_ring, &v_ring, &k, &v};
    const Params params(p);
    Tensor got = Tensor::empty(op->infer({q2.desc(), k_ring.desc(), v_ring.desc(), k.desc(), v.desc()}, params));
    op->run(in, params, got);
    for (int64_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::fabs(double(want.f32()[i]) - got.f32()[i]));
    pos += T;
  }
  EXPECT_LT(worst, 1e-5) << "window " << rc.window << " ring " << rc.ring << " after " << pos << " positions";
}

TEST(RingAttention, EqualsFullAttentionWithTheWindowAcrossWraps) {
  // Decode steps only, the ring exactly as long as the window.
  check_ring({4, 2, 8, 8, 8, std::vector<int64_t>(40, 1)});
  // A prefill longer than the ring, then steps; a ring of window - 1 rows.
  check_ring({4, 2, 8, 8, 7, {21, 1, 1, 1, 5, 1, 1}});
  // Uneven chunks crossing the wrap, grouped heads, softcap.
  check_ring({6, 3, 16, 5, 6, {3, 4, 2, 7, 1, 9, 1, 1}, 30.0});
  // ALiBi: biases by the keys' positions, not their rows.
  check_ring({4, 4, 8, 6, 6, {9, 1, 1, 4, 1, 1, 1}, 0, true});
  // A window longer than the history so far: nothing is cut yet.
  check_ring({2, 1, 4, 64, 64, {10, 1, 1}});
}

TEST(RingAttention, RefusesARingShorterThanTheWindowNeeds) {
  const json p = {{"heads", 2}, {"headDim", 4}, {"window", 9}, {"posOffset", 0}};
  expect_bad_graph("ring_attention", {{DType::F32, {1, 8}}, {DType::F32, {7, 8}}, {DType::F32, {7, 8}}, {DType::F32, {1, 8}},
                                      {DType::F32, {1, 8}}},
                   p, "needs a ring of at least window - 1 = 8 rows, got 7");
  expect_bad_graph("ring_attention", {{DType::F32, {1, 8}}, {DType::F32, {8, 8}}, {DType::F32, {8, 8}}, {DType::F32, {1, 8}},
                                      {DType::F32, {1, 8}}},
                   {{"heads", 2}, {"headDim", 4}}, "window is required");
}

}  // namespace
}  // namespace bonfire
