// Ops written as expressions in the project's one expression language
// (core/expr.h): expr (elementwise over its inputs) and recurrence (a
// per-token program over a recurrent state) (docs/IR.md §10; rule R15).
#include "ir/op_table.h"
#include "ir/schema_check.h"

namespace bonfire::ir {

using detail::Checker;
using detail::Flow;

using detail::str;

namespace {

// ---- expr ---------------------------------------------------------------------

void check_expr(Checker& c, const std::string& sec, size_t k, const json& node) {
  detail::check_expr_node(c, node_path(sec, k), node);
}

void expr_widths(Flow& f) {
  for (size_t j = 1; j < f.inputs(); ++j) f.defer(0, j, "expr's");
  f.same_width(f.x(0));
}

std::vector<Value> lower_expr(Lowerer& L) {
  std::vector<std::string> in;
  for (size_t i = 0; i < L.input_count(); ++i) in.push_back(L.input(i).ref);
  return {{L.emit("expr", in, {{"expr", L.field("expr")}}), L.input(0).width}};
}

// ---- recurrence -------------------------------------------------------------------

size_t recurrence_inputs(const json& node) { return node["inputs"].size(); }

void check_recurrence(Checker& c, const std::string& sec, size_t k, const json& node) {
  detail::check_recurrence(c, node_path(sec, k), node);
}

// The output is as wide as the product of the index sizes; every input as
// wide as that or 1, and so is every weight.
void recurrence_widths(Flow& f) {
  const json& n = f.node();
  int64_t width = 1;
  bool known = n["index"].is_object();
  if (known)
    for (const auto& [k, s] : n["index"].items()) {
      if (!s.is_number_integer()) known = false;
      else width = detail::mul(width, s.get<int64_t>());
      if (width < 0) known = false;
    }
  f.fixed(known ? width : -1, "product of the recurrence index sizes");
  const int o = f.last_out();
  for (size_t j = 0; j < f.inputs(); ++j) f.defer_vars(o, f.x(j), j, "recurrence");
  if (n.contains("weights") && n["weights"].is_object() && known)
    for (const auto& [k, wn] : n["weights"].items()) {
      if (!wn.is_string()) continue;
      const std::string suffix = ".weights" + json_path_key(k);
      if (const Tensor* t = f.tensor(wn.get<std::string>(), suffix))
        if (t->numel() != width && t->numel() != 1)
          f.bad_shape(suffix, f.tname(wn), *t, "recurrence weights are [" + str(width) + "] (the output width) or [1]");
    }
}

std::vector<Value> lower_recurrence(Lowerer& L) {
  const json& slot = L.slot(L.field("state").get<std::string>());
  std::vector<std::string> in;
  for (size_t i = 0; i < L.input_count(); ++i) in.push_back(L.input(i).ref);
  json index = json::array();
  int64_t width = 1;
  for (const auto& [name, size] : L.field("index").items()) {
    index.push_back({name, size});
    width *= size.get<int64_t>();
  }
  json weight_names = json::array();
  if (L.has("weights"))
    for (const auto& [alias, tmpl] : L.field("weights").items()) {
      weight_names.push_back(alias);
      in.push_back(L.weight(tmpl.get<std::string>()));
    }
  json state_names = json::array();
  for (const auto& t : slot["tensors"]) state_names.push_back(t["name"]);
  const std::vector<std::string> states = L.slot_states(slot);
  json p = {{"index", index},
            {"inputs", L.field("inputs")},
            {"weights", weight_names},
            {"state", state_names},
            {"let", L.has("let") ? L.field("let") : json::array()},
            {"update", L.field("update")},
            {"readout", L.field("readout")}};
  bool body_init = false;
  for (const auto& t : slot["tensors"])
    if (t["init"] == "body") body_init = true;
  if (L.allocating() && body_init) {
    // The initial state comes from the program's `init` statements.
    json pi = p;
    pi["mode"] = "init";
    pi["init"] = L.has("init") ? L.field("init") : json::array();
    std::vector<std::string> init_in(in.begin() + L.input_count(), in.end());
    init_in.insert(init_in.end(), states.begin(), states.end());
    L.emit("recurrence", init_in, pi, "recurrence_init");
  }
  in.insert(in.end(), states.begin(), states.end());
  return {{L.emit("recurrence", in, p), width}};
}

}  // namespace

void register_ir_program_ops(std::vector<IrOpDef>& ops) {
  IrOpDef expr = ir_op("expr", 1, expr_widths, lower_expr);
  expr.max_inputs = -1;
  expr.check = check_expr;
  ops.push_back(expr);
  IrOpDef rec = ir_op("recurrence", 0, recurrence_widths, lower_recurrence);
  rec.inputs_of = recurrence_inputs;
  rec.inputs_text = "(one per name in inputs)";
  rec.state = SlotKind::Recurrent;
  rec.check = check_recurrence;
  ops.push_back(rec);
}

}  // namespace bonfire::ir
