// Lowering of the IR ops protocol v3 cannot express (it has no exp, log or
// division): each becomes one protocol extension op behind its own feature
// (docs/PROTOCOL-EXTENSIONS.md). The recurrent state lives in the session
// and the op advances it in place.
#include "ir/lowerer.h"

namespace bonfire::ir {

namespace {

// The slot's tensors as session references, in the slot's order.
std::vector<std::string> slot_states(Lowerer& L, const json& slot) {
  std::vector<std::string> refs;
  for (const auto& t : slot["tensors"]) refs.push_back(L.state(slot["name"], t["name"], t["shape"].get<std::vector<int64_t>>()));
  return refs;
}

std::string weight_or_null(Lowerer& L, const char* key) {
  if (!L.has(key)) return "";
  return L.weight(L.field(key).get<std::string>());
}

Value expr_op(Lowerer& L) {
  std::vector<std::string> in;
  for (size_t i = 0; i < L.input_count(); ++i) in.push_back(L.input(i).ref);
  return {L.emit("expr", in, {{"expr", L.field("expr")}}), L.input(0).width};
}

Value recurrence(Lowerer& L, const json& slot) {
  const json& node = L.field("readout");  // presence checked by the schema
  (void)node;
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
  const std::vector<std::string> states = slot_states(L, slot);
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
  return {L.emit("recurrence", in, p), width};
}

}  // namespace

Value lower_scan(Lowerer& L, const std::string& op) {
  if (op == "expr") return expr_op(L);
  if (op == "depth_route") {
    const Value x = L.input(0), y = L.input(1);
    json p = {{"step", L.int_field("step", 1)}, {"gate", L.str_field("gate", "score")}};
    return {L.emit("depth_route", {x.ref, y.ref, L.weight(L.field("weight").get<std::string>())}, p), x.width};
  }
  const json& slot = L.slot(L.field("state").get<std::string>());
  if (op == "recurrence") return recurrence(L, slot);
  const std::vector<std::string> states = slot_states(L, slot);
  const Value x = L.input(0);
  if (op == "linear_attention") {
    const int64_t heads = L.int_field("heads", 1), head_dim = L.int_field("head_dim", 1);
    json p = {{"heads", heads}, {"headDim", head_dim}, {"denFloor", L.num_field("den_floor", 1e-6)},
              {"featureMap", L.str_field("feature_map", "elu_plus_one")}};
    std::vector<std::string> in = {x.ref, L.input(1).ref, L.input(2).ref};
    in.insert(in.end(), states.begin(), states.end());
    return {L.emit("linear_attention", in, p), heads * head_dim};
  }
  if (op == "ssm_scan") {
    std::vector<std::string> in = {x.ref, weight_or_null(L, "a"), weight_or_null(L, "b"), weight_or_null(L, "c"),
                                   weight_or_null(L, "d")};
    in.insert(in.end(), states.begin(), states.end());
    return {L.emit("ssm_scan", in), x.width};
  }
  // selective_scan
  std::vector<std::string> in = {x.ref, L.input(1).ref, L.input(2).ref, L.input(3).ref, weight_or_null(L, "a")};
  if (L.has("d")) in.push_back(weight_or_null(L, "d"));
  in.insert(in.end(), states.begin(), states.end());
  json p = json::object();
  const json& sp = L.field("dt_softplus");
  if (sp.is_boolean()) p["dtSoftplus"] = sp.get<bool>();
  return {L.emit("selective_scan", in, p), x.width};
}

}  // namespace bonfire::ir
