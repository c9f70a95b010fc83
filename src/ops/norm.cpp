// Row-wise normalisations: layernorm, rmsnorm (optionally per group of
// channels, optionally with Gemma's weight offset) and softmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/threads.h"
#include "ops/op.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

constexpr int64_t kRowGrain = 8;
constexpr int64_t kNormGrain = 4096;

Shape infer_layernorm(const std::vector<TensorDesc>& in, const Params& p) {
  for (size_t i = 0; i < 3; ++i) check_f32(in, i, i == 0 ? "x" : i == 1 ? "gamma" : "beta");
  const int64_t C = in[0].cols();
  check(!in[0].shape.empty(), "x must have at least one axis");
  check(in[1].numel() == C,
        [&] { return "gamma must have " + std::to_string(C) + " values, got " + shape_str(in[1].shape); });
  check(in[2].numel() == C,
        [&] { return "beta must have " + std::to_string(C) + " values, got " + shape_str(in[2].shape); });
  check(p.num("eps", 1e-5) >= 0, "param eps must not be negative");
  return in[0].shape;
}

void run_layernorm(const OpInputs& in, const Params& p, Tensor& out) {
  const int64_t C = out.cols();
  const double eps = p.num("eps", 1e-5);
  const float *x = in[0]->f32(), *g = in[1]->f32(), *b = in[2]->f32();
  float* o = out.f32();
  parallel_for(out.rows(), kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * C;
      double mean = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mean += xr[c];
      mean /= C;
      for (int64_t c = 0; c < C; ++c) var += (xr[c] - mean) * (xr[c] - mean);
      var /= C;
      const float inv = (float)(1.0 / std::sqrt(var + eps));
      for (int64_t c = 0; c < C; ++c) o[r * C + c] = (float)(xr[c] - mean) * inv * g[c] + b[c];
    }
  });
}

Shape infer_rmsnorm(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "x");
  check_f32(in, 1, "gamma");
  check(!in[0].shape.empty(), "x must have at least one axis");
  const int64_t C = in[0].cols();
  const int64_t group = p.int_("groupSize", C);
  check(group > 0 && C % group == 0,
        [&] { return "param groupSize " + std::to_string(group) + " must divide the row width " + std::to_string(C); });
  check(in[1].numel() == group,
        [&] { return "gamma must have " + std::to_string(group) + " values, got " + shape_str(in[1].shape); });
  check(p.num("eps", 1e-6) >= 0, "param eps must not be negative");
  return in[0].shape;
}

void run_rmsnorm(const OpInputs& in, const Params& p, Tensor& out) {
  const int64_t C = out.cols();
  const int64_t G = p.int_("groupSize", C);
  const double eps = p.num("eps", 1e-6);
  const float offset = (float)p.num("weightOffset", 0.0);
  const float *x = in[0]->f32(), *g = in[1]->f32();
  float* o = out.f32();
  // Every group of G channels in every row is normalised on its own.
  // Chunks of about kNormGrain values: a batched decode step's 8 rows of
  // 2048 are worth both threads.
  const int64_t groups = out.numel() / G;
  parallel_for(groups, std::max<int64_t>(1, kNormGrain / G), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * G;
      const double ss = simd::sum_squares_f64(xr, G);
      const float inv = (float)(1.0 / std::sqrt(ss / G + eps));
      simd::scale_gain_f32(xr, inv, g, offset, o + r * G, G);
    }
  });
}

Shape infer_softmax(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "x");
  return in[0].shape;
}

void run_softmax(const OpInputs& in, const Params&, Tensor& out) {
  const int64_t C = out.cols();
  const float* x = in[0]->f32();
  float* o = out.f32();
  parallel_for(out.rows(), kRowGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * C;
      float* orow = o + r * C;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < C; ++c) mx = std::fmax(mx, xr[c]);
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) {
        orow[c] = std::exp(xr[c] - mx);  // an all -inf row gives NaN, as in PyTorch
        sum += orow[c];
      }
      const float inv = (float)(1.0 / sum);
      for (int64_t c = 0; c < C; ++c) orow[c] *= inv;
    }
  });
}

}  // namespace

void register_norm_ops(std::vector<OpDef>& ops) {
  OpDef ln;
  ln.name = "layernorm";
  ln.min_inputs = ln.max_inputs = 3;
  ln.params = {{"eps", ParamType::Number, true}};
  ln.features = {{.name = "layernorm.eps", .params = {"eps"},
                  .neutral = [](const nlohmann::json& p) { return p["eps"] == 1e-5; }}};
  ln.infer = infer_layernorm;
  ln.run = run_layernorm;
  ln.rows = RowRule::FirstOperand;
  ops.push_back(ln);

  OpDef rms;
  rms.name = "rmsnorm";
  rms.min_inputs = rms.max_inputs = 2;
  rms.params = {{"eps", ParamType::Number, true},
                {"weightOffset", ParamType::Number, true},
                {"groupSize", ParamType::Number, true}};
  rms.features = {{.name = "rmsnorm.groupSize", .params = {"groupSize"}},
                   {.name = "rmsnorm.weightOffset", .params = {"weightOffset"},
                    .neutral = [](const nlohmann::json& p) { return p["weightOffset"] == 0; }}};
  rms.infer = infer_rmsnorm;
  rms.run = run_rmsnorm;
  rms.rows = RowRule::FirstOperand;
  ops.push_back(rms);

  OpDef sm;
  sm.name = "softmax";
  sm.min_inputs = sm.max_inputs = 1;
  sm.infer = infer_softmax;
  sm.run = run_softmax;
  ops.push_back(sm);
}

}  // namespace bonfire
