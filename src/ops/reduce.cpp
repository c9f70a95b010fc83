// Reductions: over every element (reduce_sum, reduce_mean) or per row of the
// last axis (reduce_max, argmax).
#include <cmath>
#include <limits>

#include "core/threads.h"
#include "ops/op.h"

namespace bonfire {

namespace {

Shape infer_all(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "x");
  return {1};
}

Shape infer_rows(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "x");
  check(!in[0].shape.empty() && in[0].cols() > 0, "x must have a non-empty last axis");
  Shape s(in[0].shape.begin(), in[0].shape.end() - 1);
  return s.empty() ? Shape{1} : s;
}

double sum_all(const Tensor& x) {
  double s = 0;
  const float* p = x.f32();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) s += p[i];
  return s;
}

void run_sum(const OpInputs& in, const Params&, Tensor& out) { out.f32()[0] = (float)sum_all(*in[0]); }

void run_mean(const OpInputs& in, const Params&, Tensor& out) {
  out.f32()[0] = (float)(sum_all(*in[0]) / (double)in[0]->numel());
}

// Row maximum and its first index; NaN wins, as torch.max does.
template <bool kIndex>
void run_row_max(const OpInputs& in, const Params&, Tensor& out) {
  const int64_t C = in[0]->cols();
  const float* x = in[0]->f32();
  float* o = out.f32();
  parallel_for(in[0]->rows(), 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * C;
      int64_t best = 0;
      for (int64_t c = 1; c < C && !std::isnan(xr[best]); ++c)
        if (xr[c] > xr[best] || std::isnan(xr[c])) best = c;
      o[r] = kIndex ? (float)best : xr[best];
    }
  });
}

OpDef def(const char* name, Shape (*infer)(const std::vector<TensorDesc>&, const Params&),
          void (*run)(const OpInputs&, const Params&, Tensor&)) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = 1;
  d.infer = infer;
  d.run = run;
  return d;
}

}  // namespace

void register_reduce_ops(std::vector<OpDef>& ops) {
  ops.push_back(def("reduce_sum", infer_all, run_sum));
  ops.push_back(def("reduce_mean", infer_all, run_mean));
  ops.push_back(def("reduce_max", infer_rows, run_row_max<false>));
  ops.push_back(def("argmax", infer_rows, run_row_max<true>));
}

}  // namespace bonfire
