// Ops across depth: lists of hidden states (list, append), attention over
// them (depth_attend) and a routed recursion step (depth_route)
// (docs/IR.md §9; rules R6, R16).
#include <cmath>

#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Checker;
using detail::Flow;

using detail::str;

namespace {

// ---- list, append ---------------------------------------------------------

void list_widths(Flow& f) {
  const int elem = f.w().fresh();
  for (size_t j = 0; j < f.inputs(); ++j)
    if (f.in(j) && !f.in(j)->list) {
      if (j == 0) f.w().unify(elem, f.in(j)->var);
      else f.same(f.in(j)->var, elem, f.name(j), "the list's first item", "list items have one width", ".in[" + str(j) + "]");
    }
  f.out({elem, true});
}

std::vector<Value> lower_list(Lowerer& L) {
  Value v;
  v.is_list = true;
  for (size_t j = 0; j < L.input_count(); ++j) v.items.push_back(L.input(j));
  return {v};
}

// The width variable of the items of the list in[0] (a fresh one when it is no list).
int item_var(Flow& f) { return f.inputs() > 0 && f.in(0) && f.in(0)->list ? f.in(0)->var : f.w().fresh(); }

void append_widths(Flow& f) {
  const int elem = item_var(f);
  if (f.inputs() > 1 && f.in(1) && !f.in(1)->list)
    f.same(f.in(1)->var, elem, f.name(1), "the items of " + detail::quoted(f.in_names()[0]), "list items have one width",
           ".in[1]");
  f.out({elem, true});
}

std::vector<Value> lower_append(Lowerer& L) {
  Value v = L.input(0);
  if (!v.is_list) L.fail("append's first input must be a list (rule R6)");
  v.items.push_back(L.input(1));
  return {v};
}

// ---- depth_attend: attention over the list's items ------------------------

void depth_attend_widths(Flow& f) {
  const int elem = item_var(f);
  const auto& ins = f.in_names();
  f.vector_weight("weight", elem, "the items of " + (ins.empty() ? std::string("the list") : detail::quoted(ins[0])));
  f.same_width(elem);
}

std::vector<Value> lower_depth_attend(Lowerer& L) {
  const Value list = L.input(0);
  if (!list.is_list || list.items.empty()) L.fail("depth_attend reads a non-empty list (rule R6)");
  const int64_t d = L.width_of(list.items[0], "list entries");
  const std::string w = L.weight(L.field("weight").get<std::string>());
  const std::string q = L.emit("reshape", {w}, {{"shape", {1, d}}}, "depth_query");
  const std::string ones = L.constant("ones", std::vector<float>(d, 1.f), {d});
  const double eps = L.num_field("eps", 1e-6);
  std::string scores;
  for (const Value& h : list.items) {
    const std::string n = L.emit("rmsnorm", {h.ref, ones}, {{"eps", eps}});
    const std::string s = L.emit("matmul", {n, q}, {{"transB", true}}, "depth_score");
    scores = scores.empty() ? s : L.emit("concat", {scores, s}, {{"axis", -1}});
  }
  const std::string a = L.emit("softmax", {L.emit("scale", {scores}, {{"factor", 1 / std::sqrt(double(d))}})});
  std::string sum;
  for (size_t j = 0; j < list.items.size(); ++j) {
    const std::string aj = L.emit("slice", {a}, {{"start", j}, {"length", 1}, {"axis", -1}});
    const std::string term = mul_column(L, list.items[j].ref, aj);
    sum = sum.empty() ? term : L.emit("add", {sum, term});
  }
  return {{sum, d}};
}

// ---- depth_route ------------------------------------------------------------

// R16: a per-layer step is a recursion step in 1..n_rec.
void check_depth_route(Checker& c, const std::string& sec, size_t k, const json& node) {
  if (!is_per_layer(node["step"])) return;
  const std::string path = node_path(sec, k);
  const auto n_rec = detail::int_field(node, "n_rec", -1);
  const json& steps = node["step"]["per_layer"];
  for (size_t l = 0; l < steps.size(); ++l) {
    const json& s = steps[l];
    if (!s.is_number_integer())
      c.report(path + ".step.per_layer[" + str(l) + "]", "step entry " + s.dump() + " is not an integer", 3);
    else if (n_rec && (s.get<int64_t>() < 1 || s.get<int64_t>() > *n_rec))
      c.report(path + ".step.per_layer[" + str(l) + "]", "step " + s.dump() + " is outside 1..n_rec (" + str(*n_rec) + ")", 16);
  }
}

void depth_route_widths(Flow& f) {
  const int v = f.x(0);
  if (f.inputs() > 1) f.same(f.x(1), v, f.name(1), f.name(0), "depth_route mixes x and y, so they have one width", ".in[1]");
  if (const Tensor* t = f.field_tensor("weight")) {
    const auto nr = f.i("n_rec");
    const std::string nm = f.tname(f.node()["weight"]);
    if (t->shape.size() != 2 || (nr && t->shape[0] != *nr))
      f.bad_shape(".weight", nm, *t, "the router is [n_rec" + (nr ? " = " + str(*nr) : std::string()) + ", width]");
    else
      f.need(v, t->shape[1], f.name(0), "columns of " + f.desc(nm, *t), ".weight", 18);
  }
  f.same_width(v);
}

std::vector<Value> lower_depth_route(Lowerer& L) {
  const Value x = L.input(0), y = L.input(1);
  json p = {{"step", L.int_field("step", 1)}, {"gate", L.str_field("gate", "score")}};
  return {{L.emit("depth_route", {x.ref, y.ref, L.weight(L.field("weight").get<std::string>())}, p), x.width}};
}

}  // namespace

void register_ir_depth_ops(std::vector<IrOpDef>& ops) {
  IrOpDef list = ir_op("list", 1, list_widths, lower_list);
  list.max_inputs = -1;
  list.makes_list = true;
  ops.push_back(list);
  IrOpDef append = ir_op("append", 2, append_widths, lower_append);
  append.reads_list = append.makes_list = true;
  ops.push_back(append);
  IrOpDef attend = ir_op("depth_attend", 1, depth_attend_widths, lower_depth_attend);
  attend.reads_list = true;
  ops.push_back(attend);
  IrOpDef route = ir_op("depth_route", 2, depth_route_widths, lower_depth_route);
  route.check = check_depth_route;
  ops.push_back(route);
}

}  // namespace bonfire::ir
