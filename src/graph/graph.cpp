#include "graph/graph.h"

#include <map>

#include "core/error.h"
#include "core/json_parse.h"
#include "graph/wire.h"

namespace bonfire {

using json = nlohmann::json;

std::string Ref::text() const {
  switch (kind) {
    case Weight: return "w:" + name;
    case Session: return "s:" + name;
    default: return name;
  }
}

namespace {

const char* type_name(ParamType t) {
  switch (t) {
    case ParamType::Number: return "a number";
    case ParamType::Bool: return "a boolean";
    case ParamType::String: return "a string";
    case ParamType::Array: return "an array";
    case ParamType::Object: return "an object";
  }
  return "?";
}

// Resolves a reference as written against what is defined so far.
Ref parse_ref(const json& j, const std::map<std::string, int>& defined, const std::set<std::string>& all_ids,
              const std::set<std::string>& inputs, const std::string& where) {
  if (!j.is_string()) bad_graph(where + ": a reference must be a string, got " + j.dump());
  const std::string s = j.get<std::string>();
  Ref r;
  if (s.rfind("w:", 0) == 0 || s.rfind("s:", 0) == 0) {
    r.kind = s[0] == 'w' ? Ref::Weight : Ref::Session;
    r.name = s.substr(2);
    if (r.name.empty()) bad_graph(where + ": empty name in \"" + s + "\"");
    return r;
  }
  r.name = s;
  if (auto it = defined.find(s); it != defined.end()) {
    r.kind = Ref::Node;
    r.node = it->second;
    return r;
  }
  if (inputs.count(s)) {
    r.kind = Ref::Input;
    return r;
  }
  if (all_ids.count(s)) bad_graph(where + ": \"" + s + "\" is used before the node that defines it");
  bad_graph(where + ": \"" + s + "\" is not a call input or an earlier node");
}

void parse_params(const json& jp, GraphNode& node, std::set<std::string>& bind_names) {
  const OpDef& op = *node.op;
  node.params = json::object();
  if (!jp.is_null() && !jp.is_object()) bad_graph("params must be an object", node.id);
  if (jp.is_object()) {
    for (const auto& [key, value] : jp.items()) {
      if (!key.empty() && key[0] == '_') continue;  // prose
      const ParamDef* def = op.param(key);
      if (!def) bad_graph("op " + op.name + " has no param \"" + key + "\"", node.id);
      if (value.is_null() && def->optional) continue;
      bool ok = false;
      switch (def->type) {
        case ParamType::Number:
          ok = value.is_number();
          if (value.is_string()) {
            Expr e = Expr::parse(value.get<std::string>());  // throws with position
            for (const auto& n : e.names()) bind_names.insert(n);
            node.exprs.emplace_back(key, std::move(e));
            continue;
          }
          break;
        case ParamType::Bool: ok = value.is_boolean(); break;
        case ParamType::String: ok = value.is_string(); break;
        case ParamType::Array: ok = value.is_array(); break;
        case ParamType::Object: ok = value.is_object(); break;
      }
      if (!ok)
        bad_graph("param " + key + " of op " + op.name + " must be " + type_name(def->type) +
                      (def->type == ParamType::Number ? " (or an expression string)" : "") + ", got " + value.dump(),
                  node.id);
      node.params[key] = value;
    }
  }
  for (const auto& def : op.params) {
    if (def.optional) continue;
    const bool given = node.params.contains(def.name) ||
                       std::any_of(node.exprs.begin(), node.exprs.end(), [&](auto& e) { return e.first == def.name; });
    if (!given) bad_graph("op " + op.name + " needs param \"" + def.name + "\"", node.id);
  }
  node.literal = Params(node.params);
}

// The node's features into the graph's set, and the node as the first user
// of its op and of each feature not used before.
void add_features(const GraphNode& node, Graph& g) {
  g.first_user.try_emplace(node.op->name, node.id);
  for (const auto& f : node.op->features) {
    const bool by_input = f.always || (f.input >= 0 && (int)node.in.size() > f.input);
    bool by_param = false, by_expr = false;
    for (const auto& p : f.params) {
      if (!f.value.empty()) {  // used only for this value of the param
        by_param = by_param || (node.params.contains(p) && node.params[p] == f.value);
        continue;
      }
      by_param = by_param || node.params.contains(p);
      by_expr = by_expr || std::any_of(node.exprs.begin(), node.exprs.end(), [&](auto& e) { return e.first == p; });
    }
    // Literal params at their neutral values ask nothing of the feature;
    // an expression might bind to anything.
    if (by_param && !by_expr && f.neutral && f.neutral(node.params)) by_param = false;
    if (by_input || by_param || by_expr) {
      g.features.insert(f.name);
      g.first_user.try_emplace(f.name, node.id);
    }
  }
}

}  // namespace

Graph Graph::parse(const json& call, const std::set<std::string>& inputs, const Limits& limits) {
  Graph g;
  if (!call.is_object()) bad_graph("a graph call must be a JSON object");
  if (!call.contains("nodes") || !call["nodes"].is_array()) bad_graph("a graph call needs \"nodes\", an array");
  const json& nodes = call["nodes"];
  if ((int64_t)nodes.size() > limits.max_nodes)
    too_large("the graph has " + std::to_string(nodes.size()) + " nodes; the limit is " +
              std::to_string(limits.max_nodes));

  std::set<std::string> all_ids;
  for (const auto& n : nodes)
    if (n.is_object() && n.contains("id") && n["id"].is_string()) all_ids.insert(n["id"].get<std::string>());

  std::map<std::string, int> defined;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& jn = nodes[i];
    GraphNode node;
    if (!jn.is_object()) bad_graph("node " + std::to_string(i) + " must be an object");
    if (!jn.contains("id") || !jn["id"].is_string() || jn["id"].get<std::string>().empty())
      bad_graph("node " + std::to_string(i) + " needs an \"id\" string");
    node.id = jn["id"].get<std::string>();
    if (defined.count(node.id) || inputs.count(node.id))
      bad_graph("the name \"" + node.id + "\" is defined twice", node.id);
    if (node.id.find(':') != std::string::npos) bad_graph("node ids may not contain ':'", node.id);
    if (!jn.contains("op") || !jn["op"].is_string()) bad_graph("node needs an \"op\" string", node.id);
    const std::string opname = jn["op"].get<std::string>();
    node.op = find_op(opname);
    if (!node.op) bad_graph("unknown op \"" + opname + "\"", node.id);
    const json in = jn.value("in", json::array());
    if (!in.is_array()) bad_graph("\"in\" must be an array of references", node.id);
    if ((int)in.size() < node.op->min_inputs || (int)in.size() > node.op->max_inputs) {
      const std::string want = node.op->min_inputs == node.op->max_inputs
                                   ? std::to_string(node.op->min_inputs)
                                   : std::to_string(node.op->min_inputs) + " to " + std::to_string(node.op->max_inputs);
      bad_graph("op " + opname + " takes " + want + " inputs, got " + std::to_string(in.size()), node.id);
    }
    for (const auto& r : in) {
      try {
        node.in.push_back(parse_ref(r, defined, all_ids, inputs, "node " + node.id));
      } catch (Error& e) {
        e.node = node.id;
        throw;
      }
      if (node.in.back().kind == Ref::Input) g.input_names.insert(node.in.back().name);
    }
    try {
      parse_params(jn.value("params", json()), node, g.bind_names);
    } catch (Error& e) {
      if (e.node.empty()) e.node = node.id;
      throw;
    }
    add_features(node, g);
    defined[node.id] = (int)g.nodes.size();
    g.nodes.push_back(std::move(node));
  }

  const json outs = call.value("outputs", json::array());
  if (!outs.is_array()) bad_graph("\"outputs\" must be an array of names");
  for (const auto& o : outs) g.outputs.push_back(parse_ref(o, defined, all_ids, inputs, "outputs"));
  if (call.contains("retain")) {
    if (!call["retain"].is_object()) bad_graph("\"retain\" must be an object {session name: value name}");
    if (!call.contains("session")) bad_graph("\"retain\" needs a \"session\"");
    for (const auto& [k, v] : call["retain"].items()) {
      Ref r = parse_ref(v, defined, all_ids, inputs, "retain");
      if (r.kind == Ref::Weight) bad_graph("retain: weights cannot be kept in a session (\"" + k + "\")");
      g.retain[k] = r;
    }
  }
  return g;
}

Call Call::parse(const json& j, const Limits& limits) { return parse(j, limits, {}, {}); }

Call Call::parse(const json& j, const Limits& limits, std::map<std::string, Tensor> inputs,
                 std::map<std::string, Tensor> weights) {
  if (!j.is_object()) bad_graph("a graph call must be a JSON object");
  Call c;
  c.inputs = std::move(inputs);
  c.weights = std::move(weights);
  std::set<std::string> names;
  for (const auto& [k, v] : c.inputs) names.insert(k);
  if (j.contains("inputs")) {
    if (!j["inputs"].is_object()) bad_graph("\"inputs\" must be an object {name: tensor}");
    int64_t total = 0;
    for (const auto& [k, v] : j["inputs"].items()) {
      c.inputs[k] = tensor_from_json(v, "input " + k, limits);
      total += c.inputs[k].nbytes();
      if (total > limits.max_total_bytes) too_large("the call's inputs exceed " + std::to_string(limits.max_total_bytes) + " bytes");
      names.insert(k);
    }
  }
  if (j.contains("weights")) {
    if (!j["weights"].is_object()) bad_graph("\"weights\" must be an object {name: tensor}");
    for (const auto& [k, v] : j["weights"].items()) c.weights[k] = tensor_from_json(v, "weight " + k, limits);
  }
  if (j.contains("bind")) {
    if (!j["bind"].is_object()) bad_graph("\"bind\" must be an object {name: number}");
    c.bind = j["bind"];
  }
  if (j.contains("model")) {
    if (!j["model"].is_string()) bad_graph("\"model\" must be a string");
    c.model = j["model"].get<std::string>();
  }
  if (j.contains("session")) {
    if (!j["session"].is_string() || j["session"].get<std::string>().empty())
      bad_graph("\"session\" must be a non-empty string");
    c.session = j["session"].get<std::string>();
  }
  if (j.contains("encoding")) c.b64 = j["encoding"] == "b64";
  c.graph = Graph::parse(j, names, limits);
  for (const auto& n : c.graph.nodes)
    for (const auto& r : n.in)
      if (r.kind == Ref::Session && c.session.empty())
        bad_graph("\"" + r.text() + "\" needs the call to name a \"session\"", n.id);
  return c;
}

Call Call::parse_text(const std::string& text, const Limits& limits) {
  return parse(parse_json(text, "graph call", kCallJsonLimits), limits);
}

}  // namespace bonfire
