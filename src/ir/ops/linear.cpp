// Ops that read a weight matrix or cut a row: embedding, pos_embedding,
// linear, split (docs/IR.md §6).
#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Flow;

using detail::str;

namespace {

// ---- embedding, pos_embedding: rows of a table [rows, width] --------------

void table_widths(Flow& f) {
  const json& n = f.node();
  const int v = f.w().fresh();
  if (!(n["op"] == "embedding" && n.contains("state_weight")))
    if (const Tensor* t = f.field_tensor("weight")) {
      if (t->shape.size() != 2)
        f.bad_shape(".weight", f.tname(n["weight"]), *t, "an embedding table is [rows, width]");
      else
        f.w().fix(v, t->shape[1], "columns of " + f.desc(f.tname(n["weight"]), *t));
    }
  f.out({v});
}

std::vector<Value> lower_embedding(Lowerer& L) {
  const Value ids = L.input(0);
  if (L.has("state_weight"))
    return {{L.emit("embedding", {ids.ref, "s:" + L.field("state_weight").get<std::string>()}),
             L.doc()["model"]["d"].get<int64_t>()}};
  const std::string tmpl = L.field("weight").get<std::string>();
  const Tensor* t = L.weight_tensor(tmpl);
  return {{L.emit("embedding", {ids.ref, L.weight(tmpl)}), t ? t->shape.back() : L.doc()["model"]["d"].get<int64_t>()}};
}

std::vector<Value> lower_pos_embedding(Lowerer& L) {
  const std::string tmpl = L.field("weight").get<std::string>();
  const Tensor* t = L.weight_tensor(tmpl);
  return {{L.emit("slice", {L.weight(tmpl)}, {{"start", "pos"}, {"length", L.step_tokens()}}),
           t ? t->shape.back() : L.doc()["model"]["d"].get<int64_t>()}};
}

// ---- linear: x W^T (+ b), W [out, in] (or the tied embedding) -----------

void linear_widths(Flow& f) {
  const json& n = f.node();
  const int in0 = f.x(0), o = f.w().fresh();
  const char* key = n.contains("tied_to") ? "tied_to" : "weight";
  if (const Tensor* t = f.field_tensor(key)) {
    const std::string nm = f.tname(n[key]);
    if (t->shape.size() != 2) {
      f.bad_shape(std::string(".") + key, nm, *t, "a linear weight is [out, in]");
    } else {
      f.need(in0, t->shape[1], f.name(0), "columns of " + f.desc(nm, *t), std::string(".") + key, 18);
      f.w().fix(o, t->shape[0], "rows of " + f.desc(nm, *t));
      if (const Tensor* b = f.field_tensor("bias"))
        if (b->numel() != t->shape[0])
          f.bad_shape(".bias", f.tname(n["bias"]), *b,
                      "the bias of a linear with " + str(t->shape[0]) + " outputs has " + str(t->shape[0]) + " values");
    }
  }
  f.out({o});
}

std::vector<Value> lower_linear(Lowerer& L) {
  const Value x = L.input(0);
  const std::string tmpl = L.has("tied_to") ? L.field("tied_to").get<std::string>() : L.field("weight").get<std::string>();
  const Tensor* t = L.weight_tensor(tmpl);
  const int64_t width = t ? t->shape[0] : -1;
  if (L.has("bias"))
    return {{L.emit("linear", {x.ref, L.weight(tmpl), L.weight(L.field("bias").get<std::string>())}, {{"transB", true}}),
             width}};
  return {{L.emit("matmul", {x.ref, L.weight(tmpl)}, {{"transB", true}}), width}};
}

// ---- split: a row cut into sizes (per group of `groups`) ------------------

size_t split_outputs(const json& node, std::string& why) {
  const size_t n = node["sizes"].size();
  why = "one per size (" + str(n) + ")";
  return n;
}

void split_widths(Flow& f) {
  const json& n = f.node();
  const int v = f.x(0);
  const int64_t groups = f.i("groups").value_or(1);
  int64_t sum = 0;
  for (const auto& s : n["sizes"]) sum = detail::add(sum, s.get<int64_t>());
  const std::string why = groups > 1 ? "split sizes sum to " + str(sum) + ", times groups " + str(groups)
                                     : "split sizes sum to " + str(sum);
  const auto& ins = f.in_names();
  f.need(v, detail::mul(sum, groups), "the input " + (ins.empty() ? std::string("") : detail::quoted(ins[0])), why,
         ".sizes");
  for (size_t j = 0; j < n["sizes"].size(); ++j)
    f.fixed(detail::mul(n["sizes"][j].get<int64_t>(), groups),
            "split sizes[" + str(j) + "]" + (groups > 1 ? " * groups" : ""));
}

Value split_part(Lowerer& L, const Value& x, int64_t groups, int64_t offset, int64_t size, int64_t total) {
  if (groups == 1) return {L.emit("slice", {x.ref}, {{"start", offset}, {"length", size}, {"axis", -1}}), size};
  const int64_t T = L.tokens();
  const std::string rows = L.emit("reshape", {x.ref}, {{"shape", {T * groups, total}}});
  const std::string part = L.emit("slice", {rows}, {{"start", offset}, {"length", size}, {"axis", -1}});
  return {L.emit("reshape", {part}, {{"shape", {T, groups * size}}}), groups * size};
}

std::vector<Value> lower_split(Lowerer& L) {
  const Value x = L.input(0);
  const json& sizes = L.field("sizes");
  const int64_t groups = L.int_field("groups", 1);
  int64_t total = 0;
  for (const auto& s : sizes) total += s.get<int64_t>();
  std::vector<Value> parts;
  int64_t offset = 0;
  for (const auto& s : sizes) {
    parts.push_back(split_part(L, x, groups, offset, s.get<int64_t>(), total));
    offset += s.get<int64_t>();
  }
  return parts;
}

}  // namespace

void register_ir_linear_ops(std::vector<IrOpDef>& ops) {
  ops.push_back(ir_op("embedding", 1, table_widths, lower_embedding));
  IrOpDef pos = ir_op("pos_embedding", 0, table_widths, lower_pos_embedding);
  pos.max_inputs = -1;  // reads the step's positions, whatever `in` names
  ops.push_back(pos);
  ops.push_back(ir_op("linear", 1, linear_widths, lower_linear));
  IrOpDef split = ir_op("split", 1, split_widths, lower_split);
  split.outputs_of = split_outputs;
  ops.push_back(split);
}

}  // namespace bonfire::ir
