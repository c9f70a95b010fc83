#include "ir/ir_doc.h"

#include "model/tokenizer/unicode.h"

namespace bonfire::ir {

bool is_per_layer(const json& v) { return v.is_object() && v.contains("per_layer"); }

const json& at_layer(const json& v, int64_t layer) {
  static const json null_value;
  if (!is_per_layer(v)) return v;
  const json& list = v["per_layer"];
  if (!list.is_array() || layer < 0 || layer >= static_cast<int64_t>(list.size())) return null_value;
  return list[static_cast<size_t>(layer)];
}

bool applies(const json& node, int64_t layer) {
  if (!node.contains("apply")) return true;
  const json& a = at_layer(node["apply"], layer);
  return a.is_boolean() ? a.get<bool>() : true;
}

int64_t weight_set(const json& doc, const json& node, int64_t layer, int64_t applications) {
  if (node.value("tensor_index", "") == "application") return applications;
  const json* block = doc.contains("block") ? &doc["block"] : nullptr;
  if (block && block->contains("weight_index")) {
    const json& w = at_layer((*block)["weight_index"], layer);
    if (w.is_number_integer()) return w.get<int64_t>();
  }
  return layer;
}

std::string weight_name(const std::string& tmpl, int64_t set, int64_t expert) {
  std::string s = tok::replace_all(tmpl, "{i}", std::to_string(set));
  return expert >= 0 ? tok::replace_all(s, "{e}", std::to_string(expert)) : s;
}

std::vector<std::string> out_names(const json& node) {
  std::vector<std::string> v;
  if (!node.contains("out")) return v;
  const json& o = node["out"];
  if (o.is_string()) v.push_back(o.get<std::string>());
  if (o.is_array())
    for (const auto& e : o)
      if (e.is_string()) v.push_back(e.get<std::string>());
  return v;
}

namespace {

nlohmann::ordered_json ordered(const json& v, const std::vector<std::string>& first) {
  if (v.is_array()) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& e : v) a.push_back(ordered(e, {"op", "in", "out", "name", "kind"}));
    return a;
  }
  if (!v.is_object()) return nlohmann::ordered_json(v);
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (const auto& k : first)
    if (v.contains(k)) o[k] = ordered(v[k], {"op", "in", "out", "name", "kind", "repeat", "state", "nodes"});
  for (const auto& [k, e] : v.items())
    if (!o.contains(k)) o[k] = ordered(e, {"op", "in", "out", "name", "kind", "repeat", "state", "nodes"});
  return o;
}

}  // namespace

nlohmann::ordered_json in_reading_order(const json& doc) {
  return ordered(doc, {"ir_version", "extensions", "family_hint", "model", "tokenizer", "inputs", "outputs", "modes", "embed",
                       "block", "head"});
}

std::string node_path(const std::string& section, size_t index) {
  return "$." + section + ".nodes[" + std::to_string(index) + "]";
}

}  // namespace bonfire::ir
