// ssd_scan: Mamba-2's scan (heads with a scalar decay, B and C per group of
// heads), lowered to the protocol extension op of the same name. Not in the
// v1 schema: a document declares the IR extension ssd_scan (docs/IR.md §17),
// and this file checks the node's fields the schema does not know (R19).
#include "ir/op_table.h"

namespace bonfire::ir {

using detail::Checker;
using detail::Flow;

using detail::str;

namespace {

const char* const kInts[] = {"heads", "head_dim", "d_state"};
const char* const kWeights[] = {"a", "d", "dt_bias"};

void check_ssd(Checker& c, const std::string& sec, size_t k, const json& node) {
  const std::string path = node_path(sec, k);
  auto bad = [&](const std::string& key, const std::string& want) {
    c.report(path + "." + key, "ssd_scan's " + key + " must be " + want +
                                   (node.contains(key) ? ", got " + node[key].dump() : " (missing)"), 19);
  };
  auto posint = [](const json& v) { return v.is_number_integer() && v.get<int64_t>() > 0; };
  if (!node.contains("state") || !node["state"].is_string()) bad("state", "the name of a recurrent slot");
  for (const char* key : kInts)
    if (!node.contains(key) || !posint(node[key])) bad(key, "a positive integer");
  for (const char* key : kWeights)
    if (!node.contains(key) || !node[key].is_string()) bad(key, "a weight name");
  if (node.contains("groups") && !posint(node["groups"])) bad("groups", "a positive integer (default 1)");
  if (posint(node.value("heads", json())) && posint(node.value("groups", json(1))) &&
      node["heads"].get<int64_t>() % node.value("groups", int64_t(1)) != 0)
    c.report(path + ".groups", "groups " + node["groups"].dump() + " does not divide heads " + node["heads"].dump(), 19);
  for (const auto& [key, v] : node.items())
    if (key != "op" && key != "in" && key != "out" && key != "apply" && key != "groups" && key != "state" &&
        key[0] != '_' && std::find(std::begin(kInts), std::end(kInts), key) == std::end(kInts) &&
        std::find(std::begin(kWeights), std::end(kWeights), key) == std::end(kWeights))
      c.report(path + "." + key, "ssd_scan has no field " + detail::quoted(key), 19);
}

// x [T, heads*head_dim], dt [T, heads], B and C [T, groups*d_state].
void ssd_widths(Flow& f) {
  const auto h = f.i("heads"), p = f.i("head_dim"), n = f.i("d_state");
  const int64_t g = f.i("groups").value_or(1);
  if (h && p) f.need(f.x(0), detail::mul(*h, *p), f.name(0), "x: heads*head_dim = " + str(*h) + "*" + str(*p), ".in[0]");
  if (h && f.inputs() > 1) f.need(f.x(1), *h, f.name(1), "dt: heads", ".in[1]");
  for (size_t j = 2; j < 4 && j < f.inputs(); ++j)
    if (n)
      f.need(f.x(j), detail::mul(g, *n), f.name(j), std::string(j == 2 ? "B" : "C") + ": groups*d_state = " + str(g) + "*" + str(*n),
             ".in[" + str(j) + "]");
  for (const char* key : kWeights)
    if (const Tensor* t = f.field_tensor(key))
      if (h && t->numel() != *h)
        f.bad_shape(std::string(".") + key, f.tname(f.node()[key]), *t, std::string(key) + " holds one value per head (" + str(*h) + ")");
  f.fixed(h && p ? detail::mul(*h, *p) : -1, "ssd_scan output heads*head_dim");
}

std::vector<Value> lower_ssd(Lowerer& L) {
  const std::vector<std::string> states = L.slot_states(L.slot(L.field("state").get<std::string>()));
  const int64_t H = L.int_field("heads", 1), P = L.int_field("head_dim", 1);
  std::vector<std::string> in;
  for (size_t j = 0; j < 4; ++j) in.push_back(L.input(j).ref);
  for (const char* key : kWeights) in.push_back(L.weight(L.field(key).get<std::string>()));
  in.insert(in.end(), states.begin(), states.end());
  json p = {{"heads", H}, {"headDim", P}, {"dState", L.int_field("d_state", 1)}};
  if (const int64_t g = L.int_field("groups", 1); g != 1) p["groups"] = g;
  return {{L.emit("ssd_scan", in, p), H * P}};
}

}  // namespace

void register_ir_ssd_ops(std::vector<IrOpDef>& ops) {
  IrOpDef d = ir_op("ssd_scan", 4, ssd_widths, lower_ssd);
  d.state = SlotKind::Recurrent;
  d.extension = "ssd_scan";
  d.weight_keys = {"a", "d", "dt_bias"};
  d.check = check_ssd;
  ops.push_back(d);
}

}  // namespace bonfire::ir
