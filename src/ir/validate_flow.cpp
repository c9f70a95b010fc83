// Values through the document, section by section and layer by layer (§2):
// R4 (names are defined before they are read), R6 (lists are read only by
// append and depth_attend), R10 (widths agree) and R18 (weights exist and
// fit, with a checkpoint).
//
// Widths are a small unification: every definition of a name on a layer is
// a value with a width variable; an op that keeps the width (rmsnorm, add,
// rope...) gives its output its input's variable, an op that fixes a width
// (split sizes, heads*head_dim, a weight's rows) fixes the variable and
// remembers where that came from. Two different widths for one variable are
// a problem at the node that added the second. Checks that are not
// equalities (add's second input is as wide as the first or 1) run at the
// end, when every width the document or checkpoint fixes is known. A width
// nothing fixes stays unknown and is never an error.
#include <algorithm>
#include <map>

#include "ir/ir_doc.h"
#include "ir/schema_check.h"
#include "ir/validate_internal.h"
#include "model/weights.h"

namespace bonfire::ir::detail {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

class Widths {
 public:
  int fresh() {
    vars_.push_back({static_cast<int>(vars_.size()), -1, ""});
    return vars_.back().parent;
  }
  int find(int v) {
    while (vars_[v].parent != v) v = vars_[v].parent = vars_[vars_[v].parent].parent;
    return v;
  }
  int64_t width(int v) { return vars_[find(v)].width; }
  const std::string& origin(int v) { return vars_[find(v)].origin; }
  // False (and nothing changes) when v already has another width.
  bool fix(int v, int64_t w, const std::string& origin) {
    Var& x = vars_[find(v)];
    if (x.width >= 0) return x.width == w;
    x.width = w;
    x.origin = origin;
    return true;
  }
  bool unify(int a, int b) {
    a = find(a), b = find(b);
    if (a == b) return true;
    if (vars_[a].width >= 0 && vars_[b].width >= 0 && vars_[a].width != vars_[b].width) return false;
    if (vars_[b].width >= 0) std::swap(a, b);
    vars_[b].parent = a;
    return true;
  }

 private:
  struct Var {
    int parent;
    int64_t width;
    std::string origin;
  };
  std::vector<Var> vars_;
};

struct Value {
  Value() = default;
  Value(int v, bool is_list = false) : var(v), list(is_list) {}
  int var = -1;       // width variable (a list: its elements' width)
  bool list = false;
  std::string where;  // the node that defined it ("" for inputs)
  int64_t layer = -1;  // the layer that defined it (-1: embed, head, inputs)
};

struct Deferred {
  int a, b;  // b must be as wide as a, or 1
  std::string path, key, message;  // message: "add's second input ..."
  int rule;
};

class Flow {
 public:
  explicit Flow(Checker& c) : c_(c) {}
  void run();

 private:
  Checker& c_;
  Widths w_;
  std::map<std::string, Value> env_;
  std::vector<Deferred> deferred_;
  std::vector<std::pair<int, int64_t>> divisible_;  // (var, group) for grouped rmsnorm
  std::vector<std::string> divisible_paths_;
  std::map<std::string, std::pair<size_t, int>> missing_;  // field path -> (problem index, more missing tensors)
  std::set<std::string> missing_names_;

  // The node being processed.
  std::string path_, sec_, op_;
  const json* node_ = nullptr;
  int64_t layer_ = -1, set_ = -1;

  std::string describe(int var) {
    const int64_t x = w_.width(var);
    return str(x) + " wide" + (w_.origin(var).empty() ? "" : " (" + w_.origin(var) + ")");
  }

  // `var` (the value `subject`) must be `width` wide because of `why`.
  void need(int var, int64_t width, const std::string& subject, const std::string& why, const std::string& suffix,
            int rule = 10) {
    if (width < 0) return;
    if (w_.fix(var, width, why + " at " + path_)) return;
    c_.report(path_ + suffix,
              subject + " must be " + str(width) + " wide (" + why + ") but is " + describe(var), rule,
              path_ + suffix + "|" + subject + "|" + str(rule));
  }
  void same(int a, int b, const std::string& sa, const std::string& sb, const std::string& why, const std::string& suffix) {
    if (w_.unify(a, b)) return;
    c_.report(path_ + suffix, sa + " is " + describe(a) + " but " + sb + " is " + describe(b) + "; " + why, 10,
              path_ + suffix + "|" + sa + "|" + sb);
  }

  int var_of(const Value* v) { return v && !v->list ? v->var : w_.fresh(); }
  std::optional<int64_t> i(const char* key) { return int_field(*node_, key, layer_); }

  // A weight the node names, resolved for this layer (and expert); null when
  // there is no checkpoint, the name has placeholders left (R7) or the
  // tensor is missing (reported).
  const Tensor* tensor(const std::string& tmpl, const std::string& suffix, int64_t expert = -1) {
    if (!c_.weights) return nullptr;
    const std::string name = tname(tmpl, expert);
    if (name.find('{') != std::string::npos) return nullptr;
    const Tensor* t = c_.weights->find(name);
    if (!t) {
      // One line per weight field: the first missing tensor, then how many more.
      auto [it, first] = missing_.insert({path_ + suffix, {c_.problems.size(), 0}});
      if (!first) {
        if (!missing_names_.count(name)) ++it->second.second;
        missing_names_.insert(name);
        return nullptr;
      }
      missing_names_.insert(name);
      std::string ctx = layer_ >= 0 ? " (layer " + str(layer_) : "";
      if (expert >= 0) ctx += (ctx.empty() ? " (" : ", ") + std::string("expert ") + str(expert);
      if (!ctx.empty()) ctx += ")";
      c_.report(path_ + suffix, "weight " + name + ctx + " is not in the checkpoint", 18, path_ + suffix + "|missing");
    }
    return t;
  }
  const Tensor* field_tensor(const char* key, int64_t expert = -1) {
    if (!node_->contains(key) || !(*node_)[key].is_string()) return nullptr;
    return tensor((*node_)[key].get<std::string>(), std::string(".") + key, expert);
  }
  // The tensor name a template stands for here ({i} only inside the block).
  std::string tname(const std::string& tmpl, int64_t expert = -1) {
    if (layer_ >= 0) return weight_name(tmpl, set_, expert);
    std::string s = tmpl;
    if (expert >= 0)
      for (size_t at; (at = s.find("{e}")) != std::string::npos;) s.replace(at, 3, std::to_string(expert));
    return s;
  }
  std::string tname(const json& tmpl, int64_t expert = -1) { return tname(tmpl.get<std::string>(), expert); }
  std::string desc(const std::string& name, const Tensor& t) { return "weight " + name + " " + shape_str(t.shape); }
  void bad_shape(const std::string& suffix, const std::string& name, const Tensor& t, const std::string& expected) {
    c_.report(path_ + suffix, "weight " + name + " is " + shape_str(t.shape) + " but " + expected, 18,
              path_ + suffix + "|shape|" + name);
  }
  // A vector weight (norm, scale) of the input's width.
  void vector_weight(const char* key, int x, const std::string& subject) {
    if (const Tensor* t = field_tensor(key))
      need(x, t->numel(), subject, "size of " + desc(tname((*node_)[key]), *t), std::string(".") + key, 18);
  }

  void process(const std::string& sec, size_t k, const json& node, int64_t layer, int64_t set);
  void widths_and_weights(const std::vector<const Value*>& in, std::vector<Value>& out);
  void hidden_state_check(const std::string& h, int64_t layer);
  std::string hidden_state_name();
};

std::string Flow::hidden_state_name() {
  // The hidden state between sections: the one name (not a list) that embed
  // defines, the block redefines and the head reads before defining it.
  std::set<std::string> embed, block, lists, head_reads, head_defs;
  for (const auto& n : c_.nodes("embed"))
    for (const auto& o : out_names(n)) {
      embed.insert(o);
      if (n["op"] == "list" || n["op"] == "append") lists.insert(o);
      else lists.erase(o);
    }
  for (const auto& n : c_.nodes("block"))
    for (const auto& o : out_names(n)) block.insert(o);
  for (const auto& n : c_.nodes("head")) {
    for (const auto& x : in_names(n))
      if (!head_defs.count(x)) head_reads.insert(x);
    for (const auto& o : out_names(n)) head_defs.insert(o);
  }
  std::vector<std::string> found;
  for (const auto& e : embed)
    if (block.count(e) && head_reads.count(e) && !lists.count(e)) found.push_back(e);
  return found.size() == 1 ? found[0] : "";
}

void Flow::hidden_state_check(const std::string& h, int64_t layer) {
  auto it = env_.find(h);
  if (h.empty() || it == env_.end() || it->second.list || it->second.where.empty()) return;
  if (layer >= 0 && it->second.layer != layer) return;  // not redefined on this layer
  path_ = it->second.where;
  need(it->second.var, c_.doc["model"]["d"].get<int64_t>(), quoted(h),
       std::string("model.d: the hidden state ") + (layer < 0 ? "leaving embed" : "leaving layer " + str(layer)), ".out");
}

void Flow::run() {
  for (const auto& name : input_names(c_.doc)) env_[name] = Value(w_.fresh());
  const std::string hidden = hidden_state_name();
  const json& embed = c_.nodes("embed");
  for (size_t k = 0; k < embed.size(); ++k) process("embed", k, embed[k], -1, -1);
  hidden_state_check(hidden, -1);
  const json& block = c_.nodes("block");
  std::vector<int64_t> applications(block.size(), 0);
  for (int64_t l = 0; l < c_.layers; ++l) {
    for (size_t k = 0; k < block.size(); ++k) {
      if (!applies(block[k], l)) continue;
      process("block", k, block[k], l, weight_set(c_.doc, block[k], l, applications[k]));
      ++applications[k];
    }
    hidden_state_check(hidden, l);
  }
  const json& head = c_.nodes("head");
  for (size_t k = 0; k < head.size(); ++k) process("head", k, head[k], -1, -1);
  const auto outs = output_names(c_.doc);
  if (std::find(outs.begin(), outs.end(), "logits") != outs.end()) {
    auto it = env_.find("logits");
    if (it != env_.end() && !it->second.list && !it->second.where.empty() && it->second.where.rfind("$.head", 0) == 0) {
      path_ = it->second.where;
      need(it->second.var, c_.doc["model"]["vocab"].get<int64_t>(), "\"logits\"", "model.vocab", ".out");
    }
  }
  for (const auto& d : deferred_) {
    const int64_t a = w_.width(d.a), b = w_.width(d.b);
    if (a >= 0 && b >= 0 && b != a && b != 1)
      c_.report(d.path, d.message + " must be " + str(a) + " wide (" + (w_.origin(d.a).empty() ? "the first input" : w_.origin(d.a)) +
                             ") or 1 but is " + describe(d.b),
                d.rule, d.key);
  }
  for (const auto& [field, m] : missing_)
    if (m.second > 0 && m.first < c_.problems.size())
      c_.problems[m.first].message += " (nor " + std::string(m.second == 1 ? "is 1 more tensor" : "are " + str(m.second) + " more tensors") +
                                       " this field names for other layers or experts)";
  for (size_t i = 0; i < divisible_.size(); ++i) {
    const int64_t x = w_.width(divisible_[i].first), g = divisible_[i].second;
    if (x >= 0 && g > 0 && x % g != 0)
      c_.report(divisible_paths_[i] + ".group",
                "group " + str(g) + " does not divide the input's width " + describe(divisible_[i].first), 10,
                divisible_paths_[i] + "|group");
  }
}

void Flow::process(const std::string& sec, size_t k, const json& node, int64_t layer, int64_t set) {
  path_ = node_path(sec, k);
  sec_ = sec;
  node_ = &node;
  layer_ = layer;
  set_ = set;
  op_ = node["op"].get<std::string>();
  const auto ins = in_names(node);
  std::vector<const Value*> in;
  for (size_t j = 0; j < ins.size(); ++j) {
    auto it = env_.find(ins[j]);
    if (it == env_.end()) {
      // Where is it defined at all?
      std::string later;
      for (const char* s : kSections)
        for (size_t m = 0; m < c_.nodes(s).size() && later.empty(); ++m)
          for (const auto& o : out_names(c_.nodes(s)[m]))
            if (o == ins[j]) later = node_path(s, m);
      c_.report(path_ + ".in[" + str(j) + "]",
                quoted(ins[j]) + " is read" + on_layer(layer) + " before any node defines it" +
                    (later.empty() ? " (no node defines it and it is not an input)"
                                   : " (it is first defined by " + later + ")"),
                4, path_ + "|in|" + ins[j]);
      in.push_back(nullptr);
      continue;
    }
    const Value& v = it->second;
    const bool list_slot = (op_ == "append" || op_ == "depth_attend") && j == 0;
    if (v.list && !list_slot)
      c_.report(path_ + ".in[" + str(j) + "]",
                quoted(ins[j]) + " is a list; only append (first input) and depth_attend read lists", 6,
                path_ + "|list|" + str(j));
    if (!v.list && list_slot)
      c_.report(path_ + ".in[" + str(j) + "]", op_ + " needs a list here but " + quoted(ins[j]) + " is not one", 6,
                path_ + "|notlist|" + str(j));
    in.push_back(&v);
  }
  std::vector<Value> out;
  widths_and_weights(in, out);
  const auto outs = out_names(node);
  for (size_t j = 0; j < outs.size(); ++j) {
    Value v = j < out.size() ? out[j] : Value(w_.fresh());
    v.where = path_;
    v.layer = layer;
    env_[outs[j]] = v;
  }
}

void Flow::widths_and_weights(const std::vector<const Value*>& in, std::vector<Value>& out) {
  const json& n = *node_;
  const auto ins = in_names(n);
  auto x = [&](size_t j) { return j < in.size() ? var_of(in[j]) : w_.fresh(); };
  auto name = [&](size_t j) { return j < ins.size() ? "input " + quoted(ins[j]) : std::string("input ") + str(j); };
  auto same_width = [&](int v) { out.push_back({v}); };
  auto fixed = [&](int64_t width, const std::string& why) {
    const int v = w_.fresh();
    if (width >= 0) w_.fix(v, width, why + " at " + path_);
    out.push_back({v});
  };
  auto defer = [&](size_t a, size_t b, const std::string& what) {
    deferred_.push_back({x(a), x(b), path_ + ".in[" + str(b) + "]", path_ + "|defer|" + str(b), what + " " + name(b), 10});
  };
  const std::string& op = op_;

  if (op == "embedding" || op == "pos_embedding") {
    const int v = w_.fresh();
    if (!(op == "embedding" && n.contains("state_weight")))
      if (const Tensor* t = field_tensor("weight")) {
        if (t->shape.size() != 2)
          bad_shape(".weight", tname(n["weight"]), *t, "an embedding table is [rows, width]");
        else
          w_.fix(v, t->shape[1], "columns of " + desc(tname(n["weight"]), *t));
      }
    out.push_back({v});
  } else if (op == "linear") {
    const int in0 = x(0), o = w_.fresh();
    const char* key = n.contains("tied_to") ? "tied_to" : "weight";
    if (const Tensor* t = field_tensor(key)) {
      const std::string nm = tname(n[key]);
      if (t->shape.size() != 2) {
        bad_shape(std::string(".") + key, nm, *t, "a linear weight is [out, in]");
      } else {
        need(in0, t->shape[1], name(0), "columns of " + desc(nm, *t), std::string(".") + key, 18);
        w_.fix(o, t->shape[0], "rows of " + desc(nm, *t));
        if (const Tensor* b = field_tensor("bias"))
          if (b->numel() != t->shape[0])
            bad_shape(".bias", tname(n["bias"]), *b, "the bias of a linear with " + str(t->shape[0]) + " outputs has " +
                                                         str(t->shape[0]) + " values");
      }
    }
    out.push_back({o});
  } else if (op == "scale" || op == "layernorm") {
    const int v = x(0);
    vector_weight("weight", v, name(0));
    vector_weight("bias", v, name(0));
    same_width(v);
  } else if (op == "rmsnorm") {
    const int v = x(0);
    const auto group = i("group");
    if (group) {
      divisible_.push_back({v, *group});
      divisible_paths_.push_back(path_);
      if (const Tensor* t = field_tensor("weight"))
        if (t->numel() != *group)
          bad_shape(".weight", tname(n["weight"]), *t, "a grouped rmsnorm weight has group = " + str(*group) + " values");
    } else {
      vector_weight("weight", v, name(0));
    }
    same_width(v);
  } else if (op == "split") {
    const int v = x(0);
    const int64_t groups = i("groups").value_or(1);
    int64_t sum = 0;
    for (const auto& s : n["sizes"]) sum = add(sum, s.get<int64_t>());
    const std::string why = groups > 1 ? "split sizes sum to " + str(sum) + ", times groups " + str(groups)
                                       : "split sizes sum to " + str(sum);
    need(v, mul(sum, groups), "the input " + (ins.empty() ? std::string("") : quoted(ins[0])), why, ".sizes");
    for (size_t j = 0; j < n["sizes"].size(); ++j)
      fixed(mul(n["sizes"][j].get<int64_t>(), groups), "split sizes[" + str(j) + "]" + (groups > 1 ? " * groups" : ""));
  } else if (op == "gelu" || op == "silu" || op == "sigmoid" || op == "relu" || op == "affine") {
    same_width(x(0));
  } else if (op == "add" || op == "mul" || op == "sub") {
    const int a = x(0);
    if (in.size() >= 2) defer(0, 1, op + "'s second");
    same_width(a);
  } else if (op == "mul_col") {
    const int a = x(0);
    if (in.size() >= 2) need(x(1), 1, name(1), "mul_col's second input is one value per row", ".in[1]");
    same_width(a);
  } else if (op == "rms_row") {
    fixed(1, "rms_row");
  } else if (op == "rope") {
    const auto h = i("heads"), hd = i("head_dim");
    const auto kv = n.contains("kv_heads") ? i("kv_heads") : h;
    for (size_t j = 0; j < in.size() && j < 2; ++j) {
      const auto heads = j == 0 ? h : kv;
      const int v = x(j);
      if (heads && hd)
        need(v, mul(*heads, *hd), name(j),
             std::string(j == 0 ? "heads" : "kv_heads") + "*head_dim = " + str(*heads) + "*" + str(*hd), ".in[" + str(j) + "]");
      same_width(v);
    }
  } else if (op == "attention") {
    const auto h = i("heads"), kv = i("kv_heads"), hd = i("head_dim");
    if (h && hd) need(x(0), mul(*h, *hd), name(0), "q: heads*head_dim = " + str(*h) + "*" + str(*hd), ".in[0]");
    for (size_t j = 1; j < 3 && j < in.size(); ++j)
      if (kv && hd)
        need(x(j), mul(*kv, *hd), name(j), std::string(j == 1 ? "k" : "v") + ": kv_heads*head_dim = " + str(*kv) + "*" + str(*hd),
             ".in[" + str(j) + "]");
    fixed(h && hd ? mul(*h, *hd) : -1, "attention output heads*head_dim");
  } else if (op == "mla_attention") {
    const auto h = i("heads"), rank = i("kv_rank"), nope = i("qk_nope"), rope = i("qk_rope"), vd = i("v_head_dim");
    const size_t c = in.size() == 4 ? 2 : 1;  // [q, c, k_pe] or [q_nope, q_pe, c, k_pe]
    if (c == 1 && h && nope && rope)
      need(x(0), mul(*h, add(*nope, *rope)), name(0),
           "q: heads*(qk_nope+qk_rope) = " + str(*h) + "*(" + str(*nope) + "+" + str(*rope) + ")", ".in[0]");
    if (c == 2 && h && nope) need(x(0), mul(*h, *nope), name(0), "q_nope: heads*qk_nope = " + str(*h) + "*" + str(*nope), ".in[0]");
    if (c == 2 && h && rope) need(x(1), mul(*h, *rope), name(1), "q_pe: heads*qk_rope = " + str(*h) + "*" + str(*rope), ".in[1]");
    if (rank && in.size() > c) need(x(c), *rank, name(c), "c: kv_rank", ".in[" + str(c) + "]");
    if (rope && in.size() > c + 1) need(x(c + 1), *rope, name(c + 1), "k_pe: qk_rope", ".in[" + str(c + 1) + "]");
    if (h && nope && vd && rank && mul(*h, add(*nope, *vd)) >= 0) {
      const std::string kb = n["k_b"].get<std::string>(), vb = n["v_b"].get<std::string>();
      if (kb == vb) {
        if (const Tensor* t = field_tensor("k_b"))
          if (t->shape != Shape{mul(*h, add(*nope, *vd)), *rank})
            bad_shape(".k_b", tname(kb), *t,
                      "k_b = v_b must be [heads*(qk_nope+v_head_dim), kv_rank] = " +
                          shape_str({mul(*h, add(*nope, *vd)), *rank}));
      } else {
        if (const Tensor* t = field_tensor("k_b"))
          if (t->shape != Shape{mul(*h, *nope), *rank})
            bad_shape(".k_b", tname(kb), *t, "k_b must be [heads*qk_nope, kv_rank] = " + shape_str({mul(*h, *nope), *rank}));
        if (const Tensor* t = field_tensor("v_b"))
          if (t->shape != Shape{mul(*h, *vd), *rank})
            bad_shape(".v_b", tname(vb), *t, "v_b must be [heads*v_head_dim, kv_rank] = " + shape_str({mul(*h, *vd), *rank}));
      }
    }
    fixed(h && vd ? mul(*h, *vd) : -1, "mla_attention output heads*v_head_dim");
  } else if (op == "moe_ffn") {
    const int v = x(0);
    const auto ne = i("n_experts");
    if (const Tensor* t = field_tensor("router")) {
      const std::string nm = tname(n["router"]);
      if (t->shape.size() != 2 || (ne && t->shape[0] != *ne))
        bad_shape(".router", nm, *t, "the router must be [n_experts" + (ne ? " = " + str(*ne) : std::string()) + ", width]");
      else
        need(v, t->shape[1], name(0), "columns of " + desc(nm, *t), ".router", 18);
    }
    if (const Tensor* t = field_tensor("selection_bias"))
      if (ne && t->numel() != *ne)
        bad_shape(".selection_bias", tname(n["selection_bias"]), *t, "selection_bias has n_experts = " + str(*ne) + " values");
    const json& ex = n["experts"];
    // Experts packed in ONNX Runtime's QMoE layout (gate = up names one
    // [E, 2I, C/pack] tensor, no {e}; ir/lower_qmoe.cpp): the moe op and the
    // QMoE package check their shapes; here only the expert count.
    const std::string g0 = ex.value("gate", ""), u0 = ex.value("up", "");
    const bool qmoe = !g0.empty() && g0 == u0 && g0.find("{e}") == std::string::npos;
    if (qmoe && c_.weights && ne)
      if (const Tensor* t = tensor(g0, ".experts.gate", -1); t && (t->shape.size() != 3 || t->shape[0] != *ne))
        bad_shape(".experts.gate", tname(g0, -1), *t, "QMoE fc1 weights are [n_experts = " + str(*ne) + ", 2I, width/pack]");
    // Past the store's size every expert is missing: stop there.
    const int64_t experts = !qmoe && c_.weights && ne ? std::min<int64_t>(*ne, (int64_t)c_.weights->size() + 1) : 0;
    for (int64_t e = 0; e < experts; ++e) {
      const std::string g = ex["gate"].get<std::string>(), u = ex["up"].get<std::string>(), d = ex["down"].get<std::string>();
      const Tensor* tg = tensor(g, ".experts.gate", e);
      const Tensor* tu = tensor(u, ".experts.up", e);
      const Tensor* td = tensor(d, ".experts.down", e);
      int64_t inter = -1;
      if (tg) {
        if (tg->shape.size() != 2) {
          bad_shape(".experts.gate", tname(g, e), *tg, "expert gate weights are [I, width]");
        } else {
          inter = tg->shape[0];
          need(v, tg->shape[1], name(0), "columns of " + desc(tname(g, e), *tg), ".experts.gate", 18);
        }
      }
      if (tu) {
        if (tu->shape.size() != 2 || (inter >= 0 && tu->shape[0] != inter))
          bad_shape(".experts.up", tname(u, e), *tu,
                    "expert up weights are [I, width]" + (inter >= 0 ? " with I = " + str(inter) + " as gate" : std::string()));
        else
          need(v, tu->shape[1], name(0), "columns of " + desc(tname(u, e), *tu), ".experts.up", 18);
      }
      if (td) {
        if (td->shape.size() != 2 || (inter >= 0 && td->shape[1] != inter))
          bad_shape(".experts.down", tname(d, e), *td,
                    "expert down weights are [width, I]" + (inter >= 0 ? " with I = " + str(inter) + " as gate" : std::string()));
        else
          need(v, td->shape[0], name(0), "rows of " + desc(tname(d, e), *td), ".experts.down", 18);
      }
    }
    same_width(v);
  } else if (op == "list") {
    const int elem = w_.fresh();
    for (size_t j = 0; j < in.size(); ++j)
      if (in[j] && !in[j]->list) {
        if (j == 0) w_.unify(elem, in[j]->var);
        else same(in[j]->var, elem, name(j), "the list's first item", "list items have one width", ".in[" + str(j) + "]");
      }
    out.push_back({elem, true});
  } else if (op == "append") {
    const int elem = in.size() > 0 && in[0] && in[0]->list ? in[0]->var : w_.fresh();
    if (in.size() > 1 && in[1] && !in[1]->list)
      same(in[1]->var, elem, name(1), "the items of " + quoted(ins[0]), "list items have one width", ".in[1]");
    out.push_back({elem, true});
  } else if (op == "depth_attend") {
    const int elem = in.size() > 0 && in[0] && in[0]->list ? in[0]->var : w_.fresh();
    vector_weight("weight", elem, "the items of " + (ins.empty() ? std::string("the list") : quoted(ins[0])));
    same_width(elem);
  } else if (op == "expr") {
    for (size_t j = 1; j < in.size(); ++j) defer(0, j, "expr's");
    same_width(x(0));
  } else if (op == "linear_attention") {
    const auto h = i("heads"), hd = i("head_dim");
    for (size_t j = 0; j < 3 && j < in.size(); ++j)
      if (h && hd)
        need(x(j), mul(*h, *hd), name(j), std::string(1, "qkv"[j]) + ": heads*head_dim = " + str(*h) + "*" + str(*hd),
             ".in[" + str(j) + "]");
    fixed(h && hd ? mul(*h, *hd) : -1, "linear_attention output heads*head_dim");
  } else if (op == "ssm_scan") {
    const int v = x(0);
    const auto nn = i("n");
    if (const Tensor* t = field_tensor("d")) need(v, t->numel(), name(0), "size of " + desc(tname(n["d"]), *t), ".d", 18);
    for (const char* key : {"a", "b", "c"})
      if (const Tensor* t = field_tensor(key))
        if (nn && mul(w_.width(v), *nn) >= 0 && t->numel() != mul(w_.width(v), *nn))
          bad_shape(std::string(".") + key, tname(n[key]), *t,
                    "ssm_scan weights a, b, c are [channels, n] = " + shape_str({w_.width(v), *nn}));
    same_width(v);
  } else if (op == "conv1d_causal") {
    const int v = x(0);
    const auto ch = i("channels"), kernel = i("kernel");
    if (ch) need(v, *ch, name(0), "channels", ".in[0]");
    if (const Tensor* t = field_tensor("weight"))
      if (ch && kernel && mul(*ch, *kernel) >= 0 && t->numel() != mul(*ch, *kernel))
        bad_shape(".weight", tname(n["weight"]), *t,
                  "conv1d_causal needs channels*kernel = " + str(*ch) + "*" + str(*kernel) + " values");
    if (const Tensor* t = field_tensor("bias"))
      if (ch && t->numel() != *ch) bad_shape(".bias", tname(n["bias"]), *t, "the bias has channels = " + str(*ch) + " values");
    same_width(v);
  } else if (op == "selective_scan") {
    const int v = x(0);
    const auto ch = i("channels"), ds = i("d_state");
    if (ch) need(v, *ch, name(0), "x: channels", ".in[0]");
    if (in.size() > 1) defer(0, 1, "selective_scan's dt,");
    for (size_t j = 2; j < 4 && j < in.size(); ++j)
      if (ds) need(x(j), *ds, name(j), std::string(j == 2 ? "B" : "C") + ": d_state", ".in[" + str(j) + "]");
    if (const Tensor* t = field_tensor("a"))
      if (ch && ds && mul(*ch, *ds) >= 0 && t->numel() != mul(*ch, *ds))
        bad_shape(".a", tname(n["a"]), *t, "a (A_log) is [channels, d_state] = " + shape_str({*ch, *ds}));
    if (const Tensor* t = field_tensor("d"))
      if (ch && t->numel() != *ch) bad_shape(".d", tname(n["d"]), *t, "d is [channels] = [" + str(*ch) + "]");
    same_width(v);
  } else if (op == "depth_route") {
    const int v = x(0);
    if (in.size() > 1) same(x(1), v, name(1), name(0), "depth_route mixes x and y, so they have one width", ".in[1]");
    if (const Tensor* t = field_tensor("weight")) {
      const auto nr = i("n_rec");
      const std::string nm = tname(n["weight"]);
      if (t->shape.size() != 2 || (nr && t->shape[0] != *nr))
        bad_shape(".weight", nm, *t, "the router is [n_rec" + (nr ? " = " + str(*nr) : std::string()) + ", width]");
      else
        need(v, t->shape[1], name(0), "columns of " + desc(nm, *t), ".weight", 18);
    }
    same_width(v);
  } else if (op == "recurrence") {
    int64_t width = 1;
    bool known = n["index"].is_object();
    if (known)
      for (const auto& [k, s] : n["index"].items()) {
        if (!s.is_number_integer()) known = false;
        else width = mul(width, s.get<int64_t>());
        if (width < 0) known = false;
      }
    fixed(known ? width : -1, "product of the recurrence index sizes");
    const int o = out.back().var;
    for (size_t j = 0; j < in.size(); ++j)
      deferred_.push_back({o, x(j), path_ + ".in[" + str(j) + "]", path_ + "|defer|" + str(j),
                           "recurrence " + name(j), 10});
    if (n.contains("weights") && n["weights"].is_object() && known)
      for (const auto& [k, wn] : n["weights"].items()) {
        if (!wn.is_string()) continue;
        const std::string suffix = ".weights" + json_path_key(k);
        if (const Tensor* t = tensor(wn.get<std::string>(), suffix))
          if (t->numel() != width && t->numel() != 1)
            bad_shape(suffix, tname(wn), *t, "recurrence weights are [" + str(width) + "] (the output width) or [1]");
      }
  }

  // Weights checked the same way whatever the op.
  if (op == "rope" && n.contains("freq_factors")) {
    const json& f = n["freq_factors"];
    const auto hd = i("head_dim");
    const auto rot = n.contains("n_rot") ? i("n_rot") : hd;
    auto check = [&](const std::string& tmpl, const std::string& suffix) {
      if (const Tensor* t = tensor(tmpl, suffix))
        if (rot && t->numel() != *rot / 2)
          bad_shape(suffix, tname(tmpl), *t, "freq_factors hold n_rot/2 = " + str(*rot / 2) + " values");
    };
    if (f.is_string()) check(f.get<std::string>(), ".freq_factors");
    if (f.is_object()) {
      check(f["short"].get<std::string>(), ".freq_factors.short");
      check(f["long"].get<std::string>(), ".freq_factors.long");
    }
  }
  if (op == "attention") {
    if (n.contains("position_bias")) tensor(n["position_bias"]["weight"].get<std::string>(), ".position_bias.weight");
    if (n.contains("relative_kv")) {
      tensor(n["relative_kv"]["key"].get<std::string>(), ".relative_kv.key");
      if (n["relative_kv"].contains("value") && n["relative_kv"]["value"].is_string())
        tensor(n["relative_kv"]["value"].get<std::string>(), ".relative_kv.value");
    }
  }
}

}  // namespace

void check_flow(Checker& c) { Flow(c).run(); }

}  // namespace bonfire::ir::detail
