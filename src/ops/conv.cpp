// Depthwise causal convolution over a carried state (conv1d), and the whole
// LFM2 gated short-conv block (short_conv), which advances its state in place.
#include <cstring>
#include <vector>

#include "core/threads.h"
#include "ops/gemm.h"
#include "ops/op.h"

namespace bonfire {

namespace {

// y[t, c] = sum_k w[c, k] * z[t + k, c] where z = [state; x] has K-1+T rows.
void depthwise_causal(const float* state, const float* x, const float* w, int64_t T, int64_t C, int64_t K,
                      float* y) {
  parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* yr = y + t * C;
      std::memset(yr, 0, C * sizeof(float));
      for (int64_t k = 0; k < K; ++k) {
        const int64_t zr = t + k;  // row of z
        const float* src = zr < K - 1 ? state + zr * C : x + (zr - (K - 1)) * C;
        for (int64_t c = 0; c < C; ++c) yr[c] += w[c * K + k] * src[c];
      }
    }
  });
}

void check_conv_weight(const TensorDesc& w, int64_t C, const char* what) {
  check(w.shape.size() == 3 && w.shape[0] == C && w.shape[1] == 1 && w.shape[2] >= 1,
        [&] { return std::string(what) + " must be [" + std::to_string(C) + ", 1, K], got " + shape_str(w.shape); });
}

void check_state(const TensorDesc& s, int64_t K, int64_t C) {
  check(s.shape.size() == 2 && s.shape[0] == K - 1 && s.shape[1] == C, [&] {
    return "state must be [K-1, C] = [" + std::to_string(K - 1) + ", " + std::to_string(C) + "], got " +
           shape_str(s.shape);
  });
}

Shape infer_conv1d(const std::vector<TensorDesc>& in, const Params&) {
  for (size_t i = 0; i < 3; ++i) check_f32(in, i, i == 0 ? "x" : i == 1 ? "weight" : "state");
  check(in[0].shape.size() == 2, [&] { return "x must be [T, C], got " + shape_str(in[0].shape); });
  const int64_t C = in[0].shape[1];
  check_conv_weight(in[1], C, "weight");
  check_state(in[2], in[1].shape[2], C);
  return in[0].shape;
}

void run_conv1d(const OpInputs& in, const Params&, Tensor& out) {
  const int64_t T = in[0]->shape[0], C = in[0]->shape[1], K = in[1]->shape[2];
  depthwise_causal(in[2]->f32(), in[0]->f32(), in[1]->f32(), T, C, K, out.f32());
}

Shape infer_short_conv(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "x");
  check_f32(in, 4, "state");
  check(in[0].shape.size() == 2, [&] { return "x must be [T, C], got " + shape_str(in[0].shape); });
  const int64_t C = in[0].shape[1];
  check(in[1].shape == Shape{3 * C, C}, [&] {
    return "in_proj must be [3C, C] = [" + std::to_string(3 * C) + ", " + std::to_string(C) + "], got " +
           shape_str(in[1].shape);
  });
  check_conv_weight(in[2], C, "conv");
  check(in[3].shape == Shape{C, C}, [&] { return "out_proj must be [C, C], got " + shape_str(in[3].shape); });
  check_state(in[4], in[2].shape[2], C);
  return in[0].shape;
}

void run_short_conv(const OpInputs& in, const Params&, Tensor& out) {
  const Tensor& x = *in[0];
  Tensor& state = *in[4];
  const int64_t T = x.shape[0], C = x.shape[1], K = in[2]->shape[2];
  const Tensor conv_w = in[2]->packed() ? to_f32(*in[2]) : *in[2];

  std::vector<float> bcx(T * 3 * C);
  gemm_nt(x.f32(), T, C, weight_rows(*in[1]), bcx.data(), 3 * C);
  // The chunks of in_proj's output are B, C (the output gate) and x.
  std::vector<float> bx(T * C), conv(T * C), y(T * C);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) bx[t * C + c] = bcx[t * 3 * C + c] * bcx[t * 3 * C + 2 * C + c];
  depthwise_causal(state.f32(), bx.data(), conv_w.f32(), T, C, K, conv.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) y[t * C + c] = bcx[t * 3 * C + C + c] * conv[t * C + c];
  gemm_nt(y.data(), T, C, weight_rows(*in[3]), out.f32(), C);

  // The new state is the last K-1 rows of [state; Bx].
  std::vector<float> next((K - 1) * C);
  for (int64_t r = 0; r < K - 1; ++r) {
    const int64_t zr = T + r;  // row of [state; Bx]
    const float* src = zr < K - 1 ? state.f32() + zr * C : bx.data() + (zr - (K - 1)) * C;
    std::memcpy(next.data() + r * C, src, C * sizeof(float));
  }
  if (!next.empty()) std::memcpy(state.f32(), next.data(), next.size() * sizeof(float));
}

}  // namespace

void register_conv_ops(std::vector<OpDef>& ops) {
  OpDef conv;
  conv.name = "conv1d";
  conv.min_inputs = conv.max_inputs = 3;
  conv.infer = infer_conv1d;
  conv.run = run_conv1d;
  ops.push_back(conv);

  OpDef sc;
  sc.name = "short_conv";
  sc.min_inputs = sc.max_inputs = 5;
  sc.infer = infer_short_conv;
  sc.run = run_short_conv;
  sc.writes_inputs = 1u << 4;
  sc.packed_inputs = (1u << 1) | (1u << 2) | (1u << 3);
  ops.push_back(sc);
}

}  // namespace bonfire
