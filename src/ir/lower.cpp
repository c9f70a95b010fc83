// The walk over a document (embed, block × n_layers, head); each node is
// lowered by its op (op_table.h). Every IR value becomes a graph node id
// "L<layer>.<name>.<n>" (embed: "E.", head: "H."); a name defined again
// gets the next n.
#include "graph/limits.h"
#include "ir/lowerer.h"
#include "ir/op_table.h"

namespace bonfire::ir {

std::string state_name(int64_t layer, const std::string& slot, const std::string& tensor) {
  return "L" + std::to_string(layer) + "." + slot + "." + tensor;
}

Lowerer::Lowerer(const json& doc, const LowerOptions& options, const WeightStore* weights)
    : doc_(doc), opt_(options), weights_(weights) {
  if (opt_.mode != "prefill" && opt_.mode != "decode")
    throw Error(ErrorCode::BadGraph, "lowering mode must be \"prefill\" or \"decode\", got \"" + opt_.mode + "\"");
  if (doc.contains("modes") && doc["modes"].is_object() && !doc["modes"].empty() && !doc["modes"].contains(opt_.mode))
    throw Error(ErrorCode::BadGraph, "the document's modes do not list \"" + opt_.mode + "\"");
  T_ = opt_.mode == "decode" ? 1 : opt_.tokens;
  if (T_ < 1) throw Error(ErrorCode::BadGraph, "a prefill needs at least one token");
  allocate_ = opt_.mode == "prefill" && opt_.allocate;
  if (opt_.ctx <= 0) opt_.ctx = doc["model"]["ctx"].get<int64_t>();
  n_layers_ = doc["model"]["n_layers"].get<int64_t>();
  if (opt_.end_layer == -1) opt_.end_layer = n_layers_;
  if (opt_.first_layer < 0 || opt_.first_layer >= opt_.end_layer || opt_.end_layer > n_layers_)
    throw Error(ErrorCode::BadGraph, "a stage's layers [first_layer, end_layer) must satisfy 0 <= first_layer < "
                                     "end_layer <= n_layers = " + std::to_string(n_layers_) + ", got [" +
                                         std::to_string(opt_.first_layer) + ", " + std::to_string(opt_.end_layer) + ")");
  define("tokens", {"tokens", 1});
  if (doc_.contains("inputs"))
    for (const auto& in : doc_["inputs"]) {
      const std::string name = in.is_string() ? in.get<std::string>() : in.value("name", "");
      if (name != "tokens") throw Error(ErrorCode::BadGraph, "the lowering knows the input \"tokens\" only, not \"" + name + "\"");
    }
}

void Lowerer::fail(const std::string& message) const {
  throw Error(ErrorCode::BadGraph, path_ + ": " + message, path_);
}

std::string Lowerer::emit(const std::string& op, const std::vector<std::string>& in, json params,
                          const std::string& hint) {
  if (const int64_t most = Limits().max_nodes; static_cast<int64_t>(nodes_.size()) >= most)
    throw Error(ErrorCode::TooLarge, "the lowered graph would have more than " + std::to_string(most) +
                                         " nodes, the most a graph call may have (graph/limits.h)");
  std::string base = (layer_ >= 0 ? "L" + std::to_string(layer_) : in_head_ ? std::string("H") : std::string("E")) +
                     "." + (hint.empty() ? op : hint);
  const int n = id_counts_[base]++;
  const std::string id = n == 0 ? base : base + "." + std::to_string(n);
  json node = {{"id", id}, {"op", op}, {"in", in}};
  if (!params.empty()) node["params"] = std::move(params);
  nodes_.push_back(std::move(node));
  return id;
}

std::string Lowerer::constant(const std::string& hint, const std::vector<float>& data,
                              const std::vector<int64_t>& shape) {
  std::string name = "const." + hint;
  for (int n = 1; inline_weights_.contains(name); ++n) name = "const." + hint + "." + std::to_string(n);
  inline_weights_[name] = {{"shape", shape}, {"data", data}};
  return "w:" + name;
}

const json& Lowerer::field(const char* key) const {
  static const json null_value;
  if (!node_->contains(key)) return null_value;
  return at_layer((*node_)[key], layer_ < 0 ? 0 : layer_);
}

int64_t Lowerer::int_field(const char* key, int64_t dflt) const {
  const json& v = field(key);
  if (v.is_null()) return dflt;
  if (!v.is_number()) fail(std::string("\"") + key + "\" must be a number on layer " + std::to_string(layer_));
  return v.get<int64_t>();
}

double Lowerer::num_field(const char* key, double dflt) const {
  const json& v = field(key);
  if (v.is_null()) return dflt;
  if (!v.is_number()) fail(std::string("\"") + key + "\" must be a number on layer " + std::to_string(layer_));
  return v.get<double>();
}

std::string Lowerer::str_field(const char* key, const std::string& dflt) const {
  const json& v = field(key);
  return v.is_string() ? v.get<std::string>() : dflt;
}

const Tensor* Lowerer::weight_tensor(const std::string& tmpl, int64_t expert) const {
  if (!weights_) return nullptr;
  const std::string name = weight_name(tmpl, weight_set_, expert);
  const Tensor* t = weights_->find(name);
  if (!t && !skipping_) fail("the checkpoint has no tensor \"" + name + "\"");
  return t;
}

std::string Lowerer::weight(const std::string& tmpl, int64_t expert) const {
  weight_tensor(tmpl, expert);
  return "w:" + weight_name(tmpl, weight_set_, expert);
}

size_t Lowerer::input_count() const { return (*node_)["in"].size(); }

Value Lowerer::input(size_t i) const {
  const json& in = (*node_)["in"];
  if (i >= in.size()) fail("needs at least " + std::to_string(i + 1) + " inputs");
  const std::string name = in[i].get<std::string>();
  if (in_head_) {
    auto r = head_rows_.find(name);
    if (r != head_rows_.end()) return r->second;
  }
  auto it = env_.find(name);
  if (it == env_.end()) fail("reads \"" + name + "\" before it is defined (rule R4)");
  return it->second;
}

int64_t Lowerer::width_of(const Value& v, const char* what) const {
  if (v.width < 0)
    fail(std::string("the width of the ") + what + " is not fixed by the document; lower with the model's weights");
  return v.width;
}

const json& Lowerer::slot(const std::string& name) const {
  const json& block = doc_["block"];
  if (block.contains("state"))
    for (const auto& s : block["state"])
      if (s.value("name", "") == name) return s;
  fail("names the state slot \"" + name + "\", which block.state does not define (rule R8)");
}

int64_t Lowerer::cache_rows(const json& s) const {
  const json& m = at_layer(s["max_len"], layer_);
  const int64_t max_len = m.is_number() ? m.get<int64_t>() : opt_.ctx;
  return std::min(max_len, opt_.ctx);
}

std::string Lowerer::expr_plus_tokens(const std::string& base) const { return base + " + " + std::to_string(T_); }

std::string Lowerer::state(const std::string& slot_name, const std::string& tensor, const std::vector<int64_t>& shape) {
  const std::string name = state_name(layer_, slot_name, tensor);
  auto it = state_refs_.find(name);
  if (it != state_refs_.end()) return it->second;
  std::string ref = "s:" + name;
  if (allocate_) {
    ref = emit("zeros", {}, {{"shape", shape}}, slot_name + "." + tensor + ".alloc");
    retain_[name] = ref;
  }
  state_refs_[name] = ref;
  return ref;
}

void Lowerer::state_written(const std::string& slot_name, const std::string& tensor, const std::string& ref) {
  const std::string name = state_name(layer_, slot_name, tensor);
  state_refs_[name] = ref;
  if (retain_.contains(name)) retain_[name] = ref;
}

std::string Lowerer::state_of_layer(int64_t layer, const std::string& slot_name, const std::string& tensor) const {
  const std::string name = state_name(layer, slot_name, tensor);
  auto it = state_refs_.find(name);
  return it != state_refs_.end() ? it->second : "s:" + name;
}

std::vector<std::string> Lowerer::slot_states(const json& slot) {
  std::vector<std::string> refs;
  for (const auto& t : slot["tensors"]) refs.push_back(state(slot["name"], t["name"], t["shape"].get<std::vector<int64_t>>()));
  return refs;
}

void Lowerer::lower_node(const json& node) {
  const std::string op = node["op"].get<std::string>();
  const std::vector<std::string> outs = out_names(node);
  if (outs.empty()) fail("has no \"out\"");
  const IrOpDef* def = find_ir_op(op);
  if (!def || !def->lower) fail("unknown op \"" + op + "\"");
  std::vector<Value> values = def->lower(*this);
  if (values.size() != outs.size())
    fail(op + " defines " + std::to_string(values.size()) + (values.size() == 1 ? " value" : " values") + " but out lists " +
         std::to_string(outs.size()) + " (rule R5)");
  for (size_t j = 0; j < outs.size(); ++j) define(outs[j], std::move(values[j]));
}

void Lowerer::lower_section(const json& nodes, const std::string& section) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    node_ = &nodes[i];
    path_ = node_path(section, i);
    lower_node(nodes[i]);
  }
}

void Lowerer::emit_outputs() {
  json outputs = json::array();
  auto logits_it = env_.find("logits");
  if (logits_it == env_.end()) throw Error(ErrorCode::BadGraph, "the head does not define \"logits\" (rule R17)");
  const std::string logits = logits_it->second.ref;
  if (opt_.logits) outputs.push_back(logits);
  if (!opt_.sample.is_null()) {
    json p = opt_.sample;
    p["step"] = "step";
    std::vector<std::string> in = {logits};
    const bool penalties = p.value("repetitionPenalty", 1.0) != 1.0 || p.value("presencePenalty", 0.0) != 0.0;
    if (penalties) {
      // The token history: every id the session has seen, one per position.
      layer_ = -1;
      const std::string name = "tokens.history";
      std::string hist = "s:" + name;
      if (allocate_) {
        hist = emit("zeros", {}, {{"shape", {opt_.ctx, 1}}}, "history.alloc");
        retain_[name] = hist;
      }
      const std::string ids = emit("reshape", {"tokens"}, {{"shape", {T_, 1}}}, "history.ids");
      in.push_back(emit("cache_write", {hist, ids}, {{"offset", "pos"}}, "history"));
      p["penaltyEnd"] = expr_plus_tokens("pos");
    }
    outputs.push_back(emit("sample", in, p, "token"));
  }
  outputs_ = outputs;
}

// Gives the node `from` the id `to`, so a step's results have stable names.
void Lowerer::rename_node(const std::string& from, const std::string& to) {
  for (auto& n : nodes_) {
    if (n["id"] == from) n["id"] = to;
    for (auto& r : n["in"])
      if (r == from) r = to;
  }
  for (auto& [k, v] : retain_.items())
    if (v == from) v = to;
  for (auto& o : outputs_)
    if (o == from) o = to;
}

void Lowerer::lower_layers(int64_t from, int64_t to, std::vector<int64_t>& applications) {
  const json& block = doc_["block"]["nodes"];
  for (layer_ = from; layer_ < to; ++layer_) {
    for (size_t i = 0; i < block.size(); ++i) {
      node_ = &block[i];
      path_ = node_path("block", i);
      if (!applies(block[i], layer_)) continue;
      weight_set_ = weight_set(doc_, block[i], layer_, applications[i]++);
      lower_node(block[i]);
    }
  }
  layer_ = -1;
  weight_set_ = 0;
}

json Lowerer::run() {
  // Counted from layer 0 in every stage: a node's weight set can depend on
  // how many earlier layers applied it (tensor_index "application").
  std::vector<int64_t> applications(doc_["block"]["nodes"].size(), 0);
  if (opt_.first_layer > 0)
    skip_to_stage(applications);
  else
    lower_section(doc_["embed"]["nodes"], "embed");
  lower_layers(opt_.first_layer, opt_.end_layer, applications);
  if (opt_.end_layer < n_layers_) {
    emit_carry_outputs();
  } else {
    in_head_ = true;
    if (!opt_.all_logits && T_ > 1) {
      // The head runs row by row: cut every value it reads to the last token.
      auto last_row = [&](const Value& v) {
        return Value{emit("slice", {v.ref}, {{"start", T_ - 1}, {"length", 1}}, "last"), v.width};
      };
      for (const auto& jn : doc_["head"]["nodes"])
        for (const auto& in : jn["in"]) {
          const std::string name = in.get<std::string>();
          if (head_rows_.count(name) || !env_.count(name)) continue;
          Value v = env_[name];
          if (v.is_list)
            for (auto& item : v.items) item = last_row(item);
          else if (v.ref != "tokens")
            v = last_row(v);
          head_rows_[name] = v;
        }
    }
    lower_section(doc_["head"]["nodes"], "head");
    emit_outputs();
    if (opt_.logits) rename_node(outputs_[0].get<std::string>(), "logits");
    if (!opt_.sample.is_null()) rename_node(outputs_.back().get<std::string>(), "token");
  }

  json call = json::object();
  if (!opt_.model_id.empty()) call["model"] = opt_.model_id;
  if (!inline_weights_.empty()) call["weights"] = inline_weights_;
  call["nodes"] = nodes_;
  call["outputs"] = outputs_;
  if (!retain_.empty()) call["retain"] = retain_;
  return call;
}

json lower(const json& doc, const LowerOptions& options, const WeightStore* weights) {
  return Lowerer(doc, options, weights).run();
}

}  // namespace bonfire::ir
