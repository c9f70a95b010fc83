#include "ir/extensions.h"

#include <algorithm>

#include "ir/ir_doc.h"
#include "ir/op_table.h"
#include "ir/schema_check.h"
#include "spec/manifest.h"

namespace bonfire::ir {

namespace {

using json = nlohmann::json;

constexpr const char* kLayerApply = "layer_apply";

// The extension that adds `op` to the IR, or nullptr for a v1 op.
const char* op_extension(const json& op) {
  const IrOpDef* def = op.is_string() ? find_ir_op(op.get<std::string>()) : nullptr;
  return def ? def->extension : nullptr;
}

// Whether the v1 schema lets a node of this op carry `apply`.
bool v1_allows_apply(const std::string& op) {
  for (const auto& branch : spec::ir_schema()["$defs"]["node"]["allOf"]) {
    const json& cond = branch["if"]["properties"]["op"];
    const bool match = (cond.contains("const") && cond["const"] == op) ||
                       (cond.contains("enum") && std::find(cond["enum"].begin(), cond["enum"].end(), op) != cond["enum"].end());
    if (!match) continue;
    const std::string ref = branch["then"]["$ref"].get<std::string>();
    const json& def = spec::ir_schema()["$defs"][ref.substr(ref.rfind('/') + 1)];
    return def.contains("properties") && def["properties"].contains("apply");
  }
  return true;  // an unknown op: the schema reports it
}

// Calls f(path, node) for every node of every section that has a v1-illegal `apply`.
template <class F>
void each_extension_apply(const json& doc, F f) {
  for (const char* sec : {"embed", "block", "head"}) {
    if (!doc.contains(sec) || !doc[sec].is_object() || !doc[sec].contains("nodes") || !doc[sec]["nodes"].is_array()) continue;
    const json& nodes = doc[sec]["nodes"];
    for (size_t k = 0; k < nodes.size(); ++k) {
      const json& n = nodes[k];
      if (n.is_object() && n.contains("apply") && n.contains("op") && n["op"].is_string() &&
          !v1_allows_apply(n["op"].get<std::string>()))
        f(node_path(sec, k), n);
    }
  }
}

}  // namespace

const std::vector<IrExtension>& ir_extensions() {
  static const std::vector<IrExtension> v = {
      {kLayerApply, 1, "apply on every op, stateful ones included: a layer chooses among stateful node kinds"},
      {"ssd_scan", 1, "the op ssd_scan: Mamba-2's scan"},
  };
  return v;
}

bool uses_extension(const json& doc, std::string_view name) {
  if (!doc.is_object() || !doc.contains("extensions") || !doc["extensions"].is_object()) return false;
  for (const auto& e : ir_extensions())
    if (name == e.name && doc["extensions"].contains(e.name) && doc["extensions"][e.name] == e.version) return true;
  return false;
}

std::vector<IrProblem> check_extension_names(const json& doc) {
  if (!doc.is_object() || !doc.contains("extensions")) return {};
  const json& ext = doc["extensions"];
  std::string known;
  for (const auto& e : ir_extensions()) known += (known.empty() ? "" : ", ") + std::string(e.name) + " " + std::to_string(e.version);
  if (!ext.is_object())
    return {{"$.extensions", "extensions is " + ext.dump() + ", expected an object {name: version} (this reader knows " + known + ")", 19}};
  std::vector<IrProblem> out;
  for (const auto& [name, version] : ext.items()) {
    const std::string path = "$.extensions" + json_path_key(name);
    const IrExtension* found = nullptr;
    for (const auto& e : ir_extensions())
      if (name == e.name) found = &e;
    if (!found)
      out.push_back({path, "the document uses the extension \"" + name + "\", which this reader does not know (it knows " + known + ")", 19});
    else if (!(version.is_number_integer() && version.get<int64_t>() == found->version))
      out.push_back({path, "extension " + name + " version " + version.dump() + " is not one this reader knows (it knows " +
                               name + " " + std::to_string(found->version) + ")",
                     19});
  }
  return out;
}

json v1_view(const json& doc) {
  if (!doc.is_object() || !doc.contains("extensions")) return doc;
  json v = doc;
  v.erase("extensions");
  // A node of an op an extension adds stands in the v1 view as a plain op of
  // the same inputs and output (its own fields are the op's check), and a
  // slot of such an op as a selective_scan slot.
  for (const char* sec : {"embed", "block", "head"}) {
    if (!v.contains(sec) || !v[sec].is_object() || !v[sec].contains("nodes") || !v[sec]["nodes"].is_array()) continue;
    for (auto& n : v[sec]["nodes"]) {
      if (!n.is_object() || !n.contains("op")) continue;
      const char* ext = op_extension(n["op"]);
      if (!ext || !uses_extension(doc, ext)) continue;
      json stand_in = {{"op", "silu"}, {"in", n.value("in", json::array())}, {"out", n.value("out", json())}};
      if (n.contains("apply")) stand_in["apply"] = n["apply"];
      n = stand_in;
    }
  }
  if (v.contains("block") && v["block"].is_object() && v["block"].contains("state") && v["block"]["state"].is_array())
    for (auto& slot : v["block"]["state"])
      if (slot.is_object() && slot.contains("op")) {
        const char* ext = op_extension(slot["op"]);
        if (ext && uses_extension(doc, ext)) slot["op"] = "selective_scan";
      }
  if (uses_extension(doc, kLayerApply))
    for (const char* sec : {"embed", "block", "head"}) {
      if (!v.contains(sec) || !v[sec].is_object() || !v[sec].contains("nodes") || !v[sec]["nodes"].is_array()) continue;
      for (auto& n : v[sec]["nodes"])
        if (n.is_object() && n.contains("apply") && n.contains("op") && n["op"].is_string() &&
            !v1_allows_apply(n["op"].get<std::string>()))
          n.erase("apply");
    }
  return v;
}

std::vector<IrProblem> check_extension_fields(const json& doc) {
  std::vector<IrProblem> out;
  for (const char* sec : {"embed", "block", "head"}) {
    if (!doc.is_object() || !doc.contains(sec) || !doc[sec].is_object() || !doc[sec].contains("nodes") ||
        !doc[sec]["nodes"].is_array())
      continue;
    const json& nodes = doc[sec]["nodes"];
    for (size_t k = 0; k < nodes.size(); ++k)
      if (nodes[k].is_object() && nodes[k].contains("op"))
        if (const char* ext = op_extension(nodes[k]["op"]); ext && !uses_extension(doc, ext))
          out.push_back({node_path(sec, k) + ".op",
                         "op " + nodes[k]["op"].get<std::string>() + " needs the extension " + ext + ": declare \"extensions\": {\"" +
                             ext + "\": 1}",
                         19});
  }
  const bool layer_apply = uses_extension(doc, kLayerApply);
  const json apply_schema = {{"$ref", "#/$defs/apply"}};
  each_extension_apply(doc, [&](const std::string& path, const json& n) {
    const std::string op = n["op"].get<std::string>();
    if (!layer_apply) {
      out.push_back({path + ".apply",
                     "apply on " + op + " needs the extension layer_apply: declare \"extensions\": {\"layer_apply\": 1}", 19});
      return;
    }
    const json& a = n["apply"];
    bool ok = schema_accepts(apply_schema, a);
    if (ok && is_per_layer(a))
      for (const auto& e : a["per_layer"]) ok = ok && e.is_boolean();
    if (!ok) out.push_back({path + ".apply", "apply is " + a.dump() + ", expected true, false or per_layer booleans", 19});
  });
  return out;
}

}  // namespace bonfire::ir
