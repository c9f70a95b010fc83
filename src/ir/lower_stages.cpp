// Pipeline stages (docs/IR.md §13): a stage lowers layers [first_layer,
// end_layer) only. The values that cross a boundary become graph inputs of
// the stage after it and outputs of the stage before it, under one name, so
// a coordinator passes one stage's outputs on as the next one's inputs.
#include <set>

#include "ir/lowerer.h"

namespace bonfire::ir {

namespace {

// The names that layers [boundary, n_layers) and the head read before
// defining them: what must come from before the boundary.
std::set<std::string> read_after(const json& doc, int64_t boundary) {
  std::set<std::string> defined, read;
  auto visit = [&](const json& node) {
    for (const auto& in : node.value("in", json::array()))
      if (in.is_string() && !defined.count(in.get<std::string>())) read.insert(in.get<std::string>());
    for (const auto& out : out_names(node)) defined.insert(out);
  };
  const json& block = doc["block"]["nodes"];
  const int64_t n_layers = doc["model"]["n_layers"].get<int64_t>();
  for (int64_t l = boundary; l < n_layers; ++l)
    for (const auto& node : block)
      if (applies(node, l)) visit(node);
  for (const auto& node : doc["head"]["nodes"]) visit(node);
  return read;
}

// A KV cache lives in the session of the stage that owns its layer; a layer
// that reads another layer's cache (kv_from) across the boundary would read
// a tensor its stage's session does not have.
void check_boundary(const json& doc, int64_t boundary) {
  const json& block = doc["block"];
  if (!block.contains("state")) return;
  const int64_t n_layers = doc["model"]["n_layers"].get<int64_t>();
  for (const auto& slot : block["state"]) {
    if (!slot.contains("kv_from")) continue;
    for (int64_t l = boundary; l < n_layers; ++l) {
      const json& from = at_layer(slot["kv_from"], l);
      if (!from.is_number_integer() || from.get<int64_t>() >= boundary) continue;
      const std::string src = std::to_string(from.get<int64_t>());
      std::string path = "$.block.state";
      for (size_t i = 0; i < block["nodes"].size(); ++i) {
        const json& node = block["nodes"][i];
        if (node.contains("state") && node["state"] == slot["name"] && applies(node, l)) {
          path = node_path("block", i);
          break;
        }
      }
      throw Error(ErrorCode::BadGraph,
                  path + ": on layer " + std::to_string(l) + " it reads the KV cache of layer " + src +
                      " (kv_from of the slot \"" + slot["name"].get<std::string>() +
                      "\"): the model cannot be split at layer " + std::to_string(boundary) + "; layers " + src +
                      " to " + std::to_string(l) + " must be in one stage",
                  path);
    }
  }
}

std::string carry_name(int64_t boundary, const std::string& value, int64_t item) {
  std::string name = "carry.L" + std::to_string(boundary) + "." + value;
  return item < 0 ? name : name + "." + std::to_string(item);
}

}  // namespace

std::vector<CarryValue> Lowerer::carry_at(int64_t boundary) const {
  std::vector<CarryValue> carry;
  std::set<std::string> names;
  auto add = [&](const Value& v, const std::string& value, int64_t item) {
    // The call input itself is given to every stage.
    if (v.ref == "tokens") return;
    CarryValue c{carry_name(boundary, value, item), value, item, v.width};
    if (!names.insert(c.name).second)
      throw Error(ErrorCode::BadGraph, "the values \"" + value + "\" and another one both cross layer " +
                                           std::to_string(boundary) + " as \"" + c.name +
                                           "\" (a name ending in .<number> beside a list): rename one to split there");
    carry.push_back(std::move(c));
  };
  for (const std::string& name : read_after(doc_, boundary)) {
    auto it = env_.find(name);
    if (it == env_.end()) continue;  // read before it is defined: its reader fails (rule R4)
    const Value& v = it->second;
    if (!v.is_list) {
      add(v, name, -1);
      continue;
    }
    for (size_t i = 0; i < v.items.size(); ++i) add(v.items[i], name, int64_t(i));
  }
  return carry;
}

std::vector<CarryValue> Lowerer::skip_to_stage(std::vector<int64_t>& applications) {
  const int64_t first = opt_.first_layer;
  check_boundary(doc_, first);
  skipping_ = true;
  lower_section(doc_["embed"]["nodes"], "embed");
  lower_layers(0, first, applications);
  skipping_ = false;
  std::vector<CarryValue> carry = carry_at(first);
  std::map<std::string, Value> env;
  env["tokens"] = {"tokens", 1};
  // As carry_at names them; list entries that are "tokens" stay so.
  auto bind = [&](const Value& v, const std::string& name, int64_t item) {
    return v.ref == "tokens" ? v : Value(carry_name(first, name, item), v.width);
  };
  for (const std::string& name : read_after(doc_, first)) {
    auto it = env_.find(name);
    if (it == env_.end()) continue;
    Value v = it->second;
    if (!v.is_list) v = bind(v, name, -1);
    for (size_t i = 0; i < v.items.size(); ++i) v.items[i] = bind(v.items[i], name, int64_t(i));
    env[name] = std::move(v);
  }
  // Everything emitted so far belongs to earlier stages (their nodes, their
  // state); only the names in scope carry over, now bound to the inputs.
  env_ = std::move(env);
  head_rows_.clear();
  nodes_ = json::array();
  inline_weights_ = json::object();
  retain_ = json::object();
  state_refs_.clear();
  return carry;
}

void Lowerer::emit_carry_outputs() {
  check_boundary(doc_, opt_.end_layer);
  std::set<std::string> ids;
  for (const auto& n : nodes_) ids.insert(n["id"].get<std::string>());
  std::map<std::string, std::string> renamed;  // node id -> the carry output it became
  for (const CarryValue& c : carry_at(opt_.end_layer)) {
    const Value& v = c.item < 0 ? env_.at(c.value) : env_.at(c.value).items[c.item];
    std::string ref = v.ref;
    if (auto r = renamed.find(ref); r != renamed.end()) {
      ref = r->second;
    } else if (ids.count(ref)) {
      rename_node(ref, c.name);
      renamed[ref] = c.name;
      outputs_.push_back(c.name);
      continue;
    }
    // The value is a stage input passed through, or a node that already
    // became another output (x and the list entry appended from it): a
    // copy under its own name. x·1 is exact.
    nodes_.push_back({{"id", c.name}, {"op", "scale"}, {"in", {ref}}, {"params", {{"factor", 1}}}});
    outputs_.push_back(c.name);
  }
}

std::vector<CarryValue> stage_carry(const json& doc, int64_t boundary, const WeightStore* weights) {
  const int64_t n_layers = doc["model"]["n_layers"].get<int64_t>();
  if (boundary <= 0 || boundary >= n_layers)
    throw Error(ErrorCode::BadGraph, "a stage boundary is a layer in 1.." + std::to_string(n_layers - 1) + ", got " +
                                         std::to_string(boundary));
  LowerOptions o;
  // Widths do not depend on the mode; use one the document allows.
  if (doc.contains("modes") && doc["modes"].is_object() && !doc["modes"].empty() && !doc["modes"].contains("decode"))
    o.mode = "prefill";
  o.first_layer = boundary;
  Lowerer L(doc, o, weights);
  std::vector<int64_t> applications(doc["block"]["nodes"].size(), 0);
  return L.skip_to_stage(applications);
}

}  // namespace bonfire::ir
