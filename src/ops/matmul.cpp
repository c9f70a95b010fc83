// matmul and linear: activations [..., K] times a weight [K, N] or, with
// transB, [N, K] as checkpoints store it (possibly packed).
#include "ops/gemm.h"
#include "ops/op.h"

namespace bonfire {

namespace {

Shape infer_product(const std::vector<TensorDesc>& in, const Params& p) {
  check_f32(in, 0, "input a");
  const TensorDesc& a = in[0];
  const TensorDesc& b = in[1];
  check(!a.shape.empty(), "input a must have at least one axis");
  check(b.shape.size() == 2, [&] { return "input b must be 2-D, got " + shape_str(b.shape); });
  const bool transB = p.flag("transB", false);
  const int64_t K = a.cols();
  const int64_t bK = transB ? b.shape[1] : b.shape[0];
  const int64_t N = transB ? b.shape[0] : b.shape[1];
  check(bK == K, [&] {
    return "inner sizes differ: a is " + shape_str(a.shape) + ", b is " + shape_str(b.shape) +
           (transB ? " (transB)" : "");
  });
  Shape out = a.shape;
  out.back() = N;
  if (in.size() > 2) {
    check_f32(in, 2, "bias");
    check(in[2].numel() == N,
          [&] { return "bias must have " + std::to_string(N) + " values, got " + shape_str(in[2].shape); });
  }
  return out;
}

void run_product(const OpInputs& in, const Params& p, Tensor& out) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  const float* bias = in.size() > 2 ? in[2]->f32() : nullptr;
  const int64_t M = a.rows(), K = a.cols(), N = out.cols();
  if (p.flag("transB", false))
    gemm_nt(a.f32(), M, K, weight_rows(b), out.f32(), N, bias);
  else
    gemm_nn(a.f32(), M, K, weight_rows(b), out.f32(), N, bias);
}

// One activation against several weights (ops/gemm.h's gemm_nt_siblings).
void run_product_siblings(const std::vector<OpInputs>& in, const std::vector<Params>& p,
                          const std::vector<Tensor*>& out) {
  std::vector<WeightRows> w;
  std::vector<float*> o;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!p[i].flag("transB", false)) {  // not the checkpoints' layout: one by one
      for (size_t j = 0; j < in.size(); ++j) run_product(in[j], p[j], *out[j]);
      return;
    }
    w.push_back(weight_rows(*in[i][1]));
    o.push_back(out[i]->f32());
  }
  const Tensor& a = *in[0][0];
  gemm_nt_siblings(a.f32(), a.rows(), a.cols(), w, o);
}

}  // namespace

void register_matmul_ops(std::vector<OpDef>& ops) {
  OpDef matmul;
  matmul.name = "matmul";
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.params = {{"transB", ParamType::Bool, true}};
  matmul.infer = infer_product;
  matmul.run = run_product;
  matmul.run_siblings = run_product_siblings;
  matmul.packed_inputs = 1u << 1;
  matmul.rows = RowRule::FirstOperand;
  ops.push_back(matmul);

  OpDef linear = matmul;
  linear.name = "linear";
  linear.min_inputs = linear.max_inputs = 3;
  linear.run_siblings = nullptr;  // each has its own bias
  ops.push_back(linear);
}

}  // namespace bonfire
