// The rules of docs/IR.md §12 that every node or slot follows (R1-R3, R5,
// R6 counts, R7, R8, R12, R16's eps, R17) and the driver. Each op's own
// rules (R9, R11, R13, R14, R15, R16) are its `check` in ir/ops/ (op_table.h);
// names, lists, widths and weights (R4, R6 lists, R10, R18) are in
// validate_flow.cpp, expressions (R15) in validate_expr.cpp.
#include "ir/validate.h"

#include <algorithm>
#include <map>
#include <regex>

#include "ir/extensions.h"
#include "ir/ir_doc.h"
#include "ir/op_table.h"
#include "ir/schema_check.h"
#include "ir/validate_internal.h"
#include "spec/manifest.h"

namespace bonfire::ir {

namespace detail {

void Checker::report(const std::string& path, const std::string& message, int rule, const std::string& key) {
  const std::string k = std::to_string(rule) + "|" + (key.empty() ? path + "|" + message : key);
  if (seen.insert(k).second) problems.push_back({path, message, rule});
}

std::optional<int64_t> int_field(const json& node, const char* key, int64_t layer) {
  if (!node.is_object() || !node.contains(key)) return std::nullopt;
  const json& v = at_layer(node[key], layer);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX));
  return std::nullopt;
}

std::optional<double> num_field(const json& node, const char* key, int64_t layer) {
  if (!node.is_object() || !node.contains(key)) return std::nullopt;
  const json& v = at_layer(node[key], layer);
  if (v.is_number()) return v.get<double>();
  return std::nullopt;
}

std::optional<std::string> str_field(const json& node, const char* key, int64_t layer) {
  if (!node.is_object() || !node.contains(key)) return std::nullopt;
  const json& v = at_layer(node[key], layer);
  if (v.is_string()) return v.get<std::string>();
  return std::nullopt;
}

std::optional<bool> bool_field(const json& node, const char* key, int64_t layer) {
  if (!node.is_object() || !node.contains(key)) return std::nullopt;
  const json& v = at_layer(node[key], layer);
  if (v.is_boolean()) return v.get<bool>();
  return std::nullopt;
}

std::vector<int64_t> node_layers(const Checker& c, const std::string& section, const json& node) {
  if (section != "block") return {-1};
  std::vector<int64_t> out;
  for (int64_t l = 0; l < c.layers; ++l)
    if (applies(node, l)) out.push_back(l);
  return out;
}

std::string on_layer(int64_t layer) { return layer >= 0 ? " on layer " + std::to_string(layer) : ""; }

std::string on_layer(const json& obj, int64_t layer) {
  bool varies = false;
  if (obj.is_object())
    for (const auto& [k, v] : obj.items()) varies = varies || is_per_layer(v);
  return varies ? on_layer(layer) : "";
}

const json* find_slot(const json& doc, const std::string& name) {
  if (!doc.contains("block") || !doc["block"].contains("state")) return nullptr;
  for (const auto& s : doc["block"]["state"])
    if (s.is_object() && s.value("name", "") == name) return &s;
  return nullptr;
}

std::vector<std::string> in_names(const json& node) {
  std::vector<std::string> v;
  if (node.contains("in") && node["in"].is_array())
    for (const auto& e : node["in"])
      if (e.is_string()) v.push_back(e.get<std::string>());
  return v;
}

namespace {
std::vector<std::string> io_names(const json& doc, const char* key, const char* fallback) {
  std::vector<std::string> v;
  if (!doc.contains(key)) return {fallback};
  for (const auto& e : doc[key]) {
    if (e.is_string()) v.push_back(e.get<std::string>());
    if (e.is_object() && e.contains("name") && e["name"].is_string()) v.push_back(e["name"].get<std::string>());
  }
  return v;
}
}  // namespace

std::vector<std::string> output_names(const json& doc) { return io_names(doc, "outputs", "logits"); }

std::vector<std::string> input_names(const json& doc) {
  auto v = io_names(doc, "inputs", "tokens");
  if (std::find(v.begin(), v.end(), "tokens") == v.end()) v.push_back("tokens");
  return v;
}

void check_kv_heads_divide(Checker& c, const std::string& path, const json& node, int64_t layer) {
  const auto h = int_field(node, "heads", layer);
  const auto kv = node.contains("kv_heads") ? int_field(node, "kv_heads", layer) : h;
  if (h && kv && *kv > 0 && *h % *kv != 0)
    c.report(path + ".kv_heads", "heads " + std::to_string(*h) + " is not divisible by kv_heads " + std::to_string(*kv) +
                                     on_layer(node, layer),
             9, path + "|div");
}

std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

// ---- R1, R2, R3 -------------------------------------------------------

// The op's definition in the schema ("op_linear", "op_plain", ...), read
// from the node's allOf if/then list.
std::string op_def(const std::string& op) {
  static const std::map<std::string, std::string> defs = [] {
    std::map<std::string, std::string> m;
    for (const auto& branch : spec::ir_schema()["$defs"]["node"]["allOf"]) {
      const json& cond = branch["if"]["properties"]["op"];
      const std::string ref = branch["then"]["$ref"].get<std::string>();
      const std::string def = ref.substr(ref.rfind('/') + 1);
      if (cond.contains("const")) m[cond["const"].get<std::string>()] = def;
      if (cond.contains("enum"))
        for (const auto& o : cond["enum"]) m[o.get<std::string>()] = def;
    }
    return m;
  }();
  auto it = defs.find(op);
  return it == defs.end() ? "" : it->second;
}

const json& schema_def(const std::string& name) { return spec::ir_schema()["$defs"][name]; }

// The alternatives a field allows besides per_layer (R3).
json alternatives(const json& field) {
  json alts = json::array();
  const json* s = &field;
  for (int depth = 0; depth < 4 && s->is_object() && s->contains("$ref"); ++depth) {
    const std::string ref = (*s)["$ref"].get<std::string>();
    if (ref == "#/$defs/per_layer") return alts;
    s = &schema_def(ref.substr(ref.rfind('/') + 1));
  }
  if (s->is_object() && s->contains("anyOf")) {
    for (const auto& b : (*s)["anyOf"])
      if (!(b.is_object() && b.value("$ref", "") == "#/$defs/per_layer")) alts.push_back(b);
  } else {
    alts.push_back(*s);
  }
  return alts;
}

std::string describe(const json& alt) {
  if (alt.is_object() && alt.contains("$ref")) {
    const std::string ref = alt["$ref"].get<std::string>();
    if (ref == "#/$defs/posint") return "a positive integer";
    if (ref == "#/$defs/nonneg") return "a non-negative integer";
    if (ref == "#/$defs/name") return "a non-empty string";
    return describe(schema_def(ref.substr(ref.rfind('/') + 1)));
  }
  if (alt.is_object() && alt.contains("enum")) {
    std::string s = "one of ";
    for (size_t i = 0; i < alt["enum"].size(); ++i) s += (i ? ", " : "") + alt["enum"][i].dump();
    return s;
  }
  if (alt.is_object() && alt.contains("type") && alt["type"].is_string()) {
    const std::string t = alt["type"].get<std::string>();
    return (t == "integer" || t == "array" || t == "object") ? "an " + t : "a " + t;
  }
  return alt.dump();
}

void check_per_layer_entries(Checker& c, const json& container, const std::string& def, const std::string& path) {
  const json& props = schema_def(def)["properties"];
  for (const auto& [key, v] : container.items()) {
    if (!is_per_layer(v) || !v["per_layer"].is_array() || !props.contains(key)) continue;
    if (key == "kv_from") continue;  // null or an earlier layer: R12
    const json alts = alternatives(props[key]);
    if (alts.empty()) continue;  // only per_layer allowed (step: R16)
    const json fragment = {{"anyOf", alts}};
    std::string allowed;
    for (size_t i = 0; i < alts.size(); ++i) allowed += (i ? " or " : "") + describe(alts[i]);
    for (size_t l = 0; l < v["per_layer"].size(); ++l) {
      const json& e = v["per_layer"][l];
      if (!schema_accepts(fragment, e))
        c.report(path + json_path_key(key) + ".per_layer[" + str(l) + "]",
                 "per_layer entry " + e.dump() + " is not a value " + key + " allows (" + allowed + ")", 3);
    }
  }
}

void count_per_layers(Checker& c, const json& v, const std::string& path) {
  if (v.is_object()) {
    if (v.contains("per_layer") && v["per_layer"].is_array() && (int64_t)v["per_layer"].size() != c.n_layers)
      c.report(path + ".per_layer",
               "per_layer has " + str(v["per_layer"].size()) + " entries but model.n_layers is " + str(c.n_layers), 2);
    for (const auto& [k, e] : v.items())
      if (k.empty() || k[0] != '_') count_per_layers(c, e, path + json_path_key(k));
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) count_per_layers(c, v[i], path + "[" + str(i) + "]");
  }
}

void check_document(Checker& c) {
  const json& d = c.doc;
  if (d["ir_version"] != 1) c.report("$.ir_version", "ir_version is " + d["ir_version"].dump() + ", expected 1", 1);
  if (d["block"]["repeat"] != d["model"]["n_layers"])
    c.report("$.block.repeat",
             "block.repeat is " + d["block"]["repeat"].dump() + " but model.n_layers is " + str(c.n_layers), 2);
  count_per_layers(c, d, "$");
  for (const char* sec : kSections) {
    const json& nodes = c.nodes(sec);
    for (size_t k = 0; k < nodes.size(); ++k) {
      const std::string def = op_def(nodes[k]["op"].get<std::string>());
      if (!def.empty()) check_per_layer_entries(c, nodes[k], def, node_path(sec, k));
    }
  }
  const json& block = d["block"];
  if (block.contains("state"))
    for (size_t i = 0; i < block["state"].size(); ++i) {
      const json& s = block["state"][i];
      check_per_layer_entries(c, s, s["kind"] == "kv" ? "slot_kv" : "slot_recurrent",
                              "$.block.state[" + str(i) + "]");
    }
  if (block.contains("weight_index") && block["weight_index"]["per_layer"].is_array()) {
    const json& w = block["weight_index"]["per_layer"];
    for (size_t l = 0; l < w.size(); ++l)
      if (!w[l].is_number_integer() || w[l].get<int64_t>() < 0 || w[l].get<int64_t>() >= c.n_layers)
        c.report("$.block.weight_index.per_layer[" + str(l) + "]",
                 "weight_index entry " + w[l].dump() + " is not an integer in [0, " + str(c.n_layers) + ")", 3);
  }
}

// ---- R5, R6 (counts) ----------------------------------------------------

void check_counts(Checker& c, const std::string& sec, size_t k, const json& node) {
  const std::string path = node_path(sec, k);
  const std::string op = node["op"].get<std::string>();
  const size_t n_in = node["in"].size();
  // R5
  const auto outs = out_names(node);
  if (node["out"].is_array()) {
    size_t want = 1;
    std::string why = "a single name";
    if (const IrOpDef* def = find_ir_op(op); def && def->outputs_of) want = def->outputs_of(node, why);
    if (node["out"].size() != want)
      c.report(path + ".out", op + " defines " + why + " but out lists " + str(node["out"].size()) + " names", 5);
    for (size_t i = 0; i < outs.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (outs[i] == outs[j]) c.report(path + ".out[" + str(i) + "]", "out names " + quoted(outs[i]) + " twice", 5);
  }
  // R6
  const IrOpDef* def = find_ir_op(op);
  if (!def) return;  // the schema names every op
  std::string want;
  bool ok = true;
  if (def->inputs_of) {
    const size_t n = def->inputs_of(node);
    ok = n_in == n;
    want = str(n) + (def->inputs_text ? std::string(" ") + def->inputs_text : "");
  } else {
    ok = int64_t(n_in) >= def->min_inputs && (def->max_inputs < 0 || int64_t(n_in) <= def->max_inputs);
    if (def->inputs_text) want = def->inputs_text;
    else if (def->max_inputs < 0) want = "at least " + str(def->min_inputs);
    else if (def->max_inputs == def->min_inputs) want = str(def->min_inputs);
    else want = str(def->min_inputs) + " or " + str(def->max_inputs);
  }
  if (!ok) c.report(path + ".in", op + " reads " + want + (want == "1" ? " input" : " inputs") + " but in lists " + str(n_in), 6);
}

// ---- R7 -----------------------------------------------------------------

struct WeightRef {
  std::string suffix;  // ".weight", ".experts.gate"
  std::string name;
  bool expert = false;
};

std::vector<WeightRef> weight_refs(const json& node) {
  std::vector<WeightRef> v;
  const std::string op = node["op"].get<std::string>();
  auto add = [&](const json& obj, const std::string& key, const std::string& suffix, bool expert = false) {
    if (obj.is_object() && obj.contains(key) && obj[key].is_string())
      v.push_back({suffix, obj[key].get<std::string>(), expert});
  };
  for (const char* k : {"weight", "bias", "tied_to", "router", "selection_bias", "k_b", "v_b"})
    add(node, k, std::string(".") + k);
  if (const IrOpDef* def = find_ir_op(op))
    for (const auto& k : def->weight_keys) add(node, k, "." + k);
  if (node.contains("experts"))
    for (const char* k : {"gate", "up", "down"}) add(node["experts"], k, std::string(".experts.") + k, true);
  if (node.contains("position_bias")) add(node["position_bias"], "weight", ".position_bias.weight");
  if (node.contains("relative_kv")) {
    add(node["relative_kv"], "key", ".relative_kv.key");
    add(node["relative_kv"], "value", ".relative_kv.value");
  }
  if (node.contains("weights") && node["weights"].is_object())
    for (const auto& [k, w] : node["weights"].items())
      if (w.is_string()) v.push_back({".weights" + json_path_key(k), w.get<std::string>(), false});
  if (node.contains("freq_factors")) {
    const json& f = node["freq_factors"];
    if (f.is_string()) v.push_back({".freq_factors", f.get<std::string>(), false});
    add(f, "short", ".freq_factors.short");
    add(f, "long", ".freq_factors.long");
  }
  return v;
}

void check_weight_names(Checker& c, const std::string& sec, size_t k, const json& node) {
  static const std::regex placeholder(R"(\{[^}]*\}?)");
  const std::string path = node_path(sec, k);
  for (const auto& w : weight_refs(node)) {
    bool has_e = false;
    for (auto it = std::sregex_iterator(w.name.begin(), w.name.end(), placeholder); it != std::sregex_iterator(); ++it) {
      const std::string p = it->str();
      if (p == "{i}") {
        if (sec != "block")
          c.report(path + w.suffix, "weight name " + quoted(w.name) + " uses {i} outside block (only block nodes have layers)", 7);
      } else if (p == "{e}") {
        has_e = true;
        if (!w.expert)
          c.report(path + w.suffix, "weight name " + quoted(w.name) + " uses {e}, which only moe_ffn expert names may", 7);
      } else {
        c.report(path + w.suffix, "weight name " + quoted(w.name) + " has an unknown placeholder " + p + " (only {i} and {e})", 7);
      }
    }
    // ONNX Runtime's QMoE layout packs every expert in one tensor: gate and
    // up name the same fc1 tensor, without {e} (docs/QMOE.md "Checkpoints").
    const json& ex = node.contains("experts") ? node["experts"] : json();
    const bool qmoe = w.expert && ex.is_object() && ex.value("gate", json()) == ex.value("up", json()) &&
                      ex.value("gate", json()).is_string();
    if (w.expert && !has_e && !qmoe)
      c.report(path + w.suffix, "expert weight name " + quoted(w.name) + " has no {e} (every expert would read one tensor)", 7);
  }
}

// ---- R8, R9, R12, R14 (state) -------------------------------------------

void check_slots(Checker& c) {
  const json& block = c.doc["block"];
  if (!block.contains("state")) return;
  const json& state = block["state"];
  const int64_t ctx = c.doc["model"]["ctx"].get<int64_t>();
  for (size_t i = 0; i < state.size(); ++i) {
    const json& s = state[i];
    const std::string path = "$.block.state[" + str(i) + "]";
    const std::string name = s["name"].get<std::string>();
    for (size_t j = 0; j < i; ++j)
      if (state[j]["name"] == s["name"])
        c.report(path + ".name", "slot name " + quoted(name) + " is used twice (also $.block.state[" + str(j) + "])", 8);
    if (s["kind"] == "recurrent") {
      const json& tensors = s["tensors"];
      for (size_t t = 0; t < tensors.size(); ++t) {
        for (size_t u = 0; u < t; ++u)
          if (tensors[u]["name"] == tensors[t]["name"])
            c.report(path + ".tensors[" + str(t) + "].name",
                     "tensor name " + tensors[t]["name"].dump() + " is used twice in slot " + quoted(name), 8);
        const json& shape = tensors[t]["shape"];
        for (size_t e = 0; e < shape.size(); ++e)
          if (!shape[e].is_number_integer() || shape[e].get<int64_t>() < 1)
            c.report(path + ".tensors[" + str(t) + "].shape[" + str(e) + "]", "shape sizes must be positive", 12);
      }
      continue;
    }
    for (int64_t l = 0; l < c.layers; ++l) {
      const auto heads = int_field(s, "heads", l), kv = int_field(s, "kv_heads", l), hd = int_field(s, "head_dim", l);
      const auto max_len = int_field(s, "max_len", l), window = int_field(s, "window", l),
                 sinks = int_field(s, "sinks", l);
      if (heads && kv && *kv > 0 && *heads % *kv != 0)
        c.report(path, "heads " + str(*heads) + " is not divisible by kv_heads " + str(*kv) + on_layer(s, l), 9,
                 path + "|heads");
      if (max_len && window && *window > *max_len)
        c.report(path + ".window", "window " + str(*window) + " is more than max_len " + str(*max_len) + on_layer(s, l), 12,
                 path + "|window");
      if (max_len && sinks && *sinks > *max_len)
        c.report(path + ".sinks", "sinks " + str(*sinks) + " is more than max_len " + str(*max_len) + on_layer(s, l), 12,
                 path + "|sinks");
      if (max_len && window && *window == 0 && *max_len < ctx)
        c.report(path + ".max_len",
                 "max_len " + str(*max_len) + " is less than model.ctx " + str(ctx) + on_layer(s, l) +
                     ", which has no window (full attention needs every position)",
                 12, path + "|max_len");
      if (!s.contains("kv_from")) continue;
      const json& from = at_layer(s["kv_from"], l);
      if (from.is_null()) continue;
      if (!from.is_number_integer()) {
        c.report(path + ".kv_from", "kv_from" + on_layer(s, l) + " is " + from.dump() + ", expected null or a layer index", 12,
                 path + "|kv_from");
        continue;
      }
      const int64_t j = from.get<int64_t>();
      if (j < 0 || j >= l) {
        c.report(path + ".kv_from", "kv_from" + on_layer(s, l) + " names layer " + str(j) + ", which is not an earlier layer",
                 12, path + "|kv_from");
        continue;
      }
      const auto kv2 = int_field(s, "kv_heads", j), hd2 = int_field(s, "head_dim", j), ml2 = int_field(s, "max_len", j);
      const int64_t w1 = kv && hd ? mul(*kv, *hd) : -1, w2 = kv2 && hd2 ? mul(*kv2, *hd2) : -1;
      if (w1 >= 0 && w2 >= 0 && max_len && ml2 && (w1 != w2 || *max_len != *ml2))
        c.report(path + ".kv_from",
                 "layer " + str(l) + " reads the cache of layer " + str(j) + ", whose shape [" + str(*ml2) + ", " +
                     str(w2) + "] differs from its own [" + str(*max_len) + ", " + str(w1) + "]",
                 12, path + "|kv_from_shape");
    }
  }
}

void check_state_use(Checker& c, const std::string& sec, size_t k, const json& node) {
  if (!node.contains("state")) return;
  const std::string path = node_path(sec, k) + ".state";
  const std::string op = node["op"].get<std::string>();
  if (sec != "block") {
    c.report(path, "state appears on a node of " + sec + "; only block nodes keep state", 8);
    return;
  }
  const std::string name = node["state"].get<std::string>();
  const json* slot = find_slot(c.doc, name);
  if (!slot) {
    c.report(path, "no slot of block.state is named " + quoted(name), 8);
    return;
  }
  const std::string kind = (*slot)["kind"].get<std::string>();
  const IrOpDef* def = find_ir_op(op);
  const SlotKind needs = def ? def->state : SlotKind::None;
  if (needs == SlotKind::Kv) {
    if (kind != "kv") c.report(path, op + " needs a kv slot but " + quoted(name) + " is " + kind, 8);
  } else if (needs == SlotKind::Recurrent) {
    if (kind != "recurrent")
      c.report(path, op + " needs a recurrent slot but " + quoted(name) + " is " + kind, 8);
    else if ((*slot)["op"] != op)
      c.report(path, "slot " + quoted(name) + " belongs to op " + (*slot)["op"].dump() + ", not " + op, 8);
  }
}

// ---- R16 -----------------------------------------------------------------

// eps, on any op that has one; the ops' own ranges and enums are their checks.
void check_eps(Checker& c, const std::string& sec, size_t k, const json& node) {
  const std::string path = node_path(sec, k);
  if (node.contains("eps")) {
    const json& e = node["eps"];
    if (is_per_layer(e)) {
      for (size_t l = 0; l < e["per_layer"].size(); ++l)
        if (e["per_layer"][l].is_number() && e["per_layer"][l].get<double>() < 0)
          c.report(path + ".eps.per_layer[" + str(l) + "]", "eps " + e["per_layer"][l].dump() + " is negative; expected >= 0", 16);
    } else if (e.is_number() && e.get<double>() < 0) {
      c.report(path + ".eps", "eps " + e.dump() + " is negative; expected >= 0", 16);
    }
  }
}

// ---- R17 ----------------------------------------------------------------

void check_outputs(Checker& c) {
  std::set<std::string> defined;
  for (const auto& n : c.nodes("head"))
    for (const auto& o : out_names(n)) defined.insert(o);
  const bool listed = c.doc.contains("outputs");
  const auto outs = output_names(c.doc);
  for (size_t i = 0; i < outs.size(); ++i)
    if (!defined.count(outs[i]))
      c.report(listed ? "$.outputs[" + str(i) + "]" : "$.head",
               "the head defines no " + quoted(outs[i]) + (listed ? ", an output" : " (outputs default to [\"logits\"])"), 17);
}

}  // namespace
}  // namespace detail

std::vector<IrProblem> validate_ir(const nlohmann::json& input, const WeightStore* weights) {
  using namespace detail;
  // Extensions first: the schema (v1) checks the document without them.
  std::vector<IrProblem> out = check_extension_names(input);
  if (!out.empty()) return out;
  out = check_extension_fields(input);
  for (auto& p : check_schema(v1_view(input))) out.push_back({p.path, p.message, 0});
  if (!out.empty()) return out;

  Checker c;
  c.doc = integral_floats_as_integers(input);
  c.weights = weights;
  c.n_layers = c.doc["model"]["n_layers"].get<int64_t>();
  c.layers = std::min(c.n_layers, kMaxSimulatedLayers);
  check_document(c);
  check_slots(c);
  for (const char* sec : kSections) {
    const json& nodes = c.nodes(sec);
    for (size_t k = 0; k < nodes.size(); ++k) {
      const json& node = nodes[k];
      check_counts(c, sec, k, node);
      check_weight_names(c, sec, k, node);
      check_state_use(c, sec, k, node);
      if (const IrOpDef* def = find_ir_op(node["op"].get<std::string>()); def && def->check) def->check(c, sec, k, node);
      check_eps(c, sec, k, node);
    }
  }
  check_flow(c);
  check_outputs(c);
  return c.problems;
}

std::string format_problem(const IrProblem& p) {
  if (p.rule == 0) return p.path + ": schema: " + p.message;
  return p.path + ": " + p.message + " (rule R" + std::to_string(p.rule) + ")";
}

void require_valid_ir(const nlohmann::json& doc, const WeightStore* weights, const std::string& what) {
  const std::vector<IrProblem> problems = validate_ir(doc, weights);
  if (problems.empty()) return;
  std::string msg = what + ": the IR is not valid: " + format_problem(problems[0]);
  if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more; see bonfire ir validate)";
  throw Error(ErrorCode::BadGraph, msg);
}

}  // namespace bonfire::ir
