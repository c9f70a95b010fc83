// Ops that scale rows: rmsnorm (also grouped), layernorm, scale (x * weight
// + bias), rms_row (docs/IR.md §6).
#include <cmath>

#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Flow;

namespace {

// ---- rmsnorm ------------------------------------------------------------

void rmsnorm_widths(Flow& f) {
  const int v = f.x(0);
  const auto group = f.i("group");
  if (group) {
    f.divisible(v, *group);
    if (const Tensor* t = f.field_tensor("weight"))
      if (t->numel() != *group)
        f.bad_shape(".weight", f.tname(f.node()["weight"]), *t,
                    "a grouped rmsnorm weight has group = " + std::to_string(*group) + " values");
  } else {
    f.vector_weight("weight", v, f.name(0));
  }
  f.same_width(v);
}

std::vector<Value> lower_rmsnorm(Lowerer& L) {
  const Value x = L.input(0);
  json p = {{"eps", L.num_field("eps", 1e-6)}};
  if (const double off = L.num_field("weight_offset", 0); off != 0) p["weightOffset"] = off;
  if (L.has("group")) p["groupSize"] = L.int_field("group", 0);
  return {{L.emit("rmsnorm", {x.ref, L.weight(L.field("weight").get<std::string>())}, p), x.width}};
}

// ---- layernorm and scale: a weight (and bias) as wide as the input --------

void weight_and_bias_widths(Flow& f) {
  const int v = f.x(0);
  f.vector_weight("weight", v, f.name(0));
  f.vector_weight("bias", v, f.name(0));
  f.same_width(v);
}

std::vector<Value> lower_layernorm(Lowerer& L) {
  const Value x = L.input(0);
  json p = json::object();
  if (const double eps = L.num_field("eps", 1e-5); eps != 1e-5) p["eps"] = eps;
  return {{L.emit("layernorm",
                  {x.ref, L.weight(L.field("weight").get<std::string>()), L.weight(L.field("bias").get<std::string>())}, p),
           x.width}};
}

std::vector<Value> lower_scale(Lowerer& L) {
  const Value x = L.input(0);
  std::string y = L.emit("mul", {x.ref, L.weight(L.field("weight").get<std::string>())});
  if (L.has("bias")) y = L.emit("add", {y, L.weight(L.field("bias").get<std::string>())});
  return {{y, x.width}};
}

// ---- rms_row --------------------------------------------------------------

void rms_row_widths(Flow& f) { f.fixed(1, "rms_row"); }

// 1/sqrt(mean(x²) + eps) per row, from one rmsnorm (its eps must be ≥ 0):
// over the row [x | c] of width d+1 with c² = d·eps and eps 0, the mean
// square is d/(d+1)·(mean(x²) + eps), so the last column comes out as
// c·sqrt((d+1)/d) / sqrt(mean(x²) + eps); its weight sqrt(d/(d+1))/c leaves
// the answer. (eps 0: c is 1e-10, whose square shifts nothing in f32.)
std::vector<Value> lower_rms_row(Lowerer& L) {
  const Value x = L.input(0);
  const int64_t d = L.width_of(x, "input");
  const double eps = L.num_field("eps", 1e-6);
  const int64_t T = L.tokens();
  const double c = eps > 0 ? std::sqrt(d * eps) : 1e-10;
  const std::string col = L.constant("rms_col", std::vector<float>(T, float(c)), {T, 1});
  const std::string row = L.emit("concat", {x.ref, col}, {{"axis", -1}});
  std::vector<float> gamma(d + 1, 1.f);
  gamma[d] = float(std::sqrt(double(d) / (d + 1)) / c);
  const std::string n = L.emit("rmsnorm", {row, L.constant("rms_gamma", gamma, {d + 1})}, {{"eps", 0.0}});
  return {{L.emit("slice", {n}, {{"start", d}, {"length", 1}, {"axis", -1}}, "rms_row"), 1}};
}

}  // namespace

void register_ir_norm_ops(std::vector<IrOpDef>& ops) {
  ops.push_back(ir_op("rmsnorm", 1, rmsnorm_widths, lower_rmsnorm));
  ops.push_back(ir_op("layernorm", 1, weight_and_bias_widths, lower_layernorm));
  ops.push_back(ir_op("scale", 1, weight_and_bias_widths, lower_scale));
  ops.push_back(ir_op("rms_row", 1, rms_row_widths, lower_rms_row));
}

}  // namespace bonfire::ir
