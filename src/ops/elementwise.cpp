// Elementwise ops: binary with the manifest's broadcast (same shape, a row
// vector as wide as a, or one value), unary maps, and the gated pairs.
#include <algorithm>
#include <cmath>

#include "core/threads.h"
#include "ops/op.h"
#include "ops/simd.h"

namespace bonfire {

namespace {

constexpr int64_t kGrain = 1 << 14;

// --- binary ---------------------------------------------------------------

Shape infer_binary(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "input a");
  check_f32(in, 1, "input b");
  const TensorDesc &a = in[0], &b = in[1];
  const bool same = a.shape == b.shape;
  // A row vector: [C], [1, C], or [1, ..., 1, C] of at most a's rank.
  const bool row = b.numel() == a.cols() && !b.shape.empty() && b.shape.back() == a.cols() &&
                   b.shape.size() <= std::max<size_t>(a.shape.size(), 2);
  const bool scalar = b.numel() == 1;
  check(same || row || scalar, [&] {
    return "b " + shape_str(b.shape) + " must have a's shape " + shape_str(a.shape) + ", be a row vector of " +
           std::to_string(a.cols()) + ", or one value";
  });
  return a.shape;
}

template <typename F>
void run_binary(const OpInputs& in, Tensor& out, F f) {
  const float* a = in[0]->f32();
  const float* b = in[1]->f32();
  float* o = out.f32();
  const int64_t n = out.numel(), bn = in[1]->numel();
  parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) {
    if (bn == n && in[1]->shape == in[0]->shape) {
      for (int64_t i = i0; i < i1; ++i) o[i] = f(a[i], b[i]);
    } else if (bn == 1) {
      for (int64_t i = i0; i < i1; ++i) o[i] = f(a[i], b[0]);
    } else {
      for (int64_t i = i0; i < i1; ++i) o[i] = f(a[i], b[i % bn]);
    }
  });
}

// add, sub and mul on vectors: the generic loop above may not be vectorized
// (out may alias an input), and a batched step's [8, 5632] mul took 15 us.
// A row-vector b runs a row at a time, split where a chunk splits a row.
void run_arith(const OpInputs& in, Tensor& out, simd::Binary op) {
  const float* a = in[0]->f32();
  const float* b = in[1]->f32();
  float* o = out.f32();
  const int64_t n = out.numel(), bn = in[1]->numel();
  const bool scalar = bn == 1, same = bn == n && in[1]->shape == in[0]->shape;
  parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) {
    if (same || scalar) return simd::binary_f32(op, a + i0, same ? b + i0 : b, scalar, o + i0, i1 - i0);
    for (int64_t i = i0; i < i1;) {
      const int64_t end = std::min(i1, (i / bn + 1) * bn);
      simd::binary_f32(op, a + i, b + i % bn, false, o + i, end - i);
      i = end;
    }
  });
}

void run_add(const OpInputs& in, const Params&, Tensor& out) { run_arith(in, out, simd::Binary::Add); }
void run_sub(const OpInputs& in, const Params&, Tensor& out) { run_arith(in, out, simd::Binary::Sub); }
void run_mul(const OpInputs& in, const Params&, Tensor& out) { run_arith(in, out, simd::Binary::Mul); }

// --- unary ----------------------------------------------------------------

Shape infer_unary(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "input");
  return in[0].shape;
}

template <typename F>
void run_unary(const OpInputs& in, Tensor& out, F f) {
  const float* x = in[0]->f32();
  float* o = out.f32();
  parallel_for(out.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) o[i] = f(x[i]);
  });
}

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

void run_relu(const OpInputs& in, const Params&, Tensor& out) {
  // NaN stays NaN (x > 0 is false, but x < 0 is false too).
  run_unary(in, out, [](float x) { return x < 0 ? 0.0f : x; });
}
// The sigmoid family, vectorized (ops/simd.h).
void run_sigmoid_times(const OpInputs& in, Tensor& out, float alpha, bool times_x) {
  const float* x = in[0]->f32();
  float* o = out.f32();
  parallel_for(out.numel(), kGrain,
               [&](int64_t i0, int64_t i1) { simd::sigmoid_f32(x + i0, o + i0, i1 - i0, alpha, times_x); });
}
void run_sigmoid(const OpInputs& in, const Params&, Tensor& out) { run_sigmoid_times(in, out, 1.0f, false); }
void run_silu(const OpInputs& in, const Params&, Tensor& out) { run_sigmoid_times(in, out, 1.0f, true); }
void run_tanh(const OpInputs& in, const Params&, Tensor& out) {
  run_unary(in, out, [](float x) { return std::tanh(x); });
}
void run_gelu(const OpInputs& in, const Params&, Tensor& out) { run_unary(in, out, gelu_tanh); }
void run_gelu_exact(const OpInputs& in, const Params&, Tensor& out) {
  run_unary(in, out, [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); });
}
void run_gelu_quick(const OpInputs& in, const Params&, Tensor& out) { run_sigmoid_times(in, out, 1.702f, true); }
void run_scale(const OpInputs& in, const Params& p, Tensor& out) {
  const float f = (float)p.num("factor");
  run_unary(in, out, [f](float x) { return x * f; });
}
Shape infer_softcap(const std::vector<TensorDesc>& in, const Params& p) {
  check(p.num("cap") != 0, "param cap must not be 0");
  return infer_unary(in, p);
}
void run_softcap(const OpInputs& in, const Params& p, Tensor& out) {
  const float cap = (float)p.num("cap");
  run_unary(in, out, [cap](float x) { return cap * std::tanh(x / cap); });
}

// --- gated pairs ------------------------------------------------------------

Shape infer_gated(const std::vector<TensorDesc>& in, const Params&) {
  check_f32(in, 0, "gate");
  check_f32(in, 1, "up");
  check(in[0].shape == in[1].shape, [&] {
    return "gate " + shape_str(in[0].shape) + " and up " + shape_str(in[1].shape) + " must have the same shape";
  });
  return in[0].shape;
}
void run_swiglu(const OpInputs& in, const Params&, Tensor& out) {
  const float *g = in[0]->f32(), *u = in[1]->f32();
  float* o = out.f32();
  parallel_for(out.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    simd::sigmoid_f32(g + i0, o + i0, i1 - i0, 1.0f, true);
    for (int64_t i = i0; i < i1; ++i) o[i] *= u[i];
  });
}
void run_geglu(const OpInputs& in, const Params&, Tensor& out) {
  run_binary(in, out, [](float g, float u) { return gelu_tanh(g) * u; });
}

OpDef def(const char* name, int inputs, Shape (*infer)(const std::vector<TensorDesc>&, const Params&),
          void (*run)(const OpInputs&, const Params&, Tensor&)) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = inputs;
  d.infer = infer;
  d.run = run;
  d.rows = RowRule::Elementwise;  // every op here is, including the gated pairs
  return d;
}

}  // namespace

void register_elementwise_ops(std::vector<OpDef>& ops) {
  ops.push_back(def("add", 2, infer_binary, run_add));
  ops.push_back(def("sub", 2, infer_binary, run_sub));
  ops.push_back(def("mul", 2, infer_binary, run_mul));
  ops.push_back(def("relu", 1, infer_unary, run_relu));
  ops.push_back(def("sigmoid", 1, infer_unary, run_sigmoid));
  ops.push_back(def("silu", 1, infer_unary, run_silu));
  ops.push_back(def("tanh", 1, infer_unary, run_tanh));
  ops.push_back(def("gelu", 1, infer_unary, run_gelu));
  ops.push_back(def("gelu_exact", 1, infer_unary, run_gelu_exact));
  ops.push_back(def("gelu_quick", 1, infer_unary, run_gelu_quick));
  OpDef scale = def("scale", 1, infer_unary, run_scale);
  scale.params = {{"factor", ParamType::Number, false}};
  ops.push_back(scale);
  OpDef softcap = def("softcap", 1, infer_softcap, run_softcap);
  softcap.params = {{"cap", ParamType::Number, false}};
  ops.push_back(softcap);
  ops.push_back(def("swiglu", 2, infer_gated, run_swiglu));
  ops.push_back(def("geglu", 2, infer_gated, run_geglu));
}

}  // namespace bonfire
