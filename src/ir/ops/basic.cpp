// Ops that act value by value: gelu, silu, sigmoid, relu, affine, add, mul,
// sub, mul_col (docs/IR.md §6).

#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Flow;

namespace {

std::vector<Value> unary(Lowerer& L, const std::string& protocol_op) {
  const Value x = L.input(0);
  return {{L.emit(protocol_op, {x.ref}), x.width}};
}

void keeps_width(Flow& f) { f.same_width(f.x(0)); }

// ---- elementwise --------------------------------------------------------

std::vector<Value> lower_gelu(Lowerer& L) { return unary(L, L.str_field("approx", "tanh") == "none" ? "gelu_exact" : "gelu"); }
std::vector<Value> lower_silu(Lowerer& L) { return unary(L, "silu"); }
std::vector<Value> lower_sigmoid(Lowerer& L) { return unary(L, "sigmoid"); }
std::vector<Value> lower_relu(Lowerer& L) { return unary(L, "relu"); }

std::vector<Value> lower_affine(Lowerer& L) {
  const Value x = L.input(0);
  std::string y = x.ref;
  if (const double s = L.num_field("scale", 1); s != 1) y = L.emit("scale", {y}, {{"factor", s}});
  if (const double b = L.num_field("shift", 0); b != 0) y = L.emit("add", {y, L.constant("shift", {float(b)}, {1})});
  if (y == x.ref) y = L.emit("scale", {y}, {{"factor", 1}});
  return {{y, x.width}};
}

// ---- binary: the second input is as wide as the first, or one column ----

void binary_widths(Flow& f) {
  const int a = f.x(0);
  if (f.inputs() >= 2) f.defer(0, 1, f.node()["op"].get<std::string>() + "'s second");
  f.same_width(a);
}

Value binary(Lowerer& L, const std::string& op) {
  const Value a = L.input(0), b = L.input(1);
  if (b.width == 1 && a.width != 1 && L.tokens() > 1) {
    if (op == "mul") return {mul_column(L, a.ref, b.ref), a.width};
    const std::string ones = L.constant("ones", std::vector<float>(L.width_of(a, "first input"), 1.f), {1, a.width});
    const std::string wide = L.emit("matmul", {b.ref, ones}, json::object(), "broadcast");
    return {L.emit(op, {a.ref, wide}), a.width};
  }
  return {L.emit(op, {a.ref, b.ref}), a.width >= 0 ? a.width : b.width};
}

std::vector<Value> lower_add(Lowerer& L) { return {binary(L, "add")}; }
std::vector<Value> lower_mul(Lowerer& L) { return {binary(L, "mul")}; }
std::vector<Value> lower_sub(Lowerer& L) { return {binary(L, "sub")}; }

void mul_col_widths(Flow& f) {
  const int a = f.x(0);
  if (f.inputs() >= 2) f.need(f.x(1), 1, f.name(1), "mul_col's second input is one value per row", ".in[1]");
  f.same_width(a);
}

std::vector<Value> lower_mul_col(Lowerer& L) {
  const Value x = L.input(0), c = L.input(1);
  return {{mul_column(L, x.ref, c.ref), x.width}};
}

}  // namespace

// x * c for c of width 1 (a column): the protocol broadcasts rows only, so
// the product is taken on the transposes.
std::string mul_column(Lowerer& L, const std::string& x, const std::string& c) {
  const std::string xt = L.emit("transpose", {x});
  const std::string ct = L.emit("transpose", {c});
  return L.emit("transpose", {L.emit("mul", {xt, ct})}, json::object(), "mul_col");
}

void register_ir_basic_ops(std::vector<IrOpDef>& ops) {
  ops.push_back(ir_op("gelu", 1, keeps_width, lower_gelu));
  ops.push_back(ir_op("silu", 1, keeps_width, lower_silu));
  ops.push_back(ir_op("sigmoid", 1, keeps_width, lower_sigmoid));
  ops.push_back(ir_op("relu", 1, keeps_width, lower_relu));
  ops.push_back(ir_op("affine", 1, keeps_width, lower_affine));
  ops.push_back(ir_op("add", 2, binary_widths, lower_add));
  ops.push_back(ir_op("mul", 2, binary_widths, lower_mul));
  ops.push_back(ir_op("sub", 2, binary_widths, lower_sub));
  ops.push_back(ir_op("mul_col", 2, mul_col_widths, lower_mul_col));
}

}  // namespace bonfire::ir
