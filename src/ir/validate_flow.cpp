// The walk of width_flow.h: values through a document, section by section
// and layer by layer. What one node does to widths is its op's `widths`
// (ir/ops/*.cpp, looked up in op_table.h).
#include <algorithm>
#include <map>

#include "ir/ir_doc.h"
#include "ir/op_table.h"
#include "ir/schema_check.h"
#include "ir/width_flow.h"
#include "model/weights.h"

namespace bonfire::ir::detail {

int Widths::fresh() {
  vars_.push_back({static_cast<int>(vars_.size()), -1, ""});
  return vars_.back().parent;
}

int Widths::find(int v) {
  while (vars_[v].parent != v) v = vars_[v].parent = vars_[vars_[v].parent].parent;
  return v;
}

bool Widths::fix(int v, int64_t w, const std::string& origin) {
  Var& x = vars_[find(v)];
  if (x.width >= 0) return x.width == w;
  x.width = w;
  x.origin = origin;
  return true;
}

bool Widths::unify(int a, int b) {
  a = find(a), b = find(b);
  if (a == b) return true;
  if (vars_[a].width >= 0 && vars_[b].width >= 0 && vars_[a].width != vars_[b].width) return false;
  if (vars_[b].width >= 0) std::swap(a, b);
  vars_[b].parent = a;
  return true;
}

std::string Flow::describe(int var) {
  const int64_t x = w_.width(var);
  return str(x) + " wide" + (w_.origin(var).empty() ? "" : " (" + w_.origin(var) + ")");
}

void Flow::need(int var, int64_t width, const std::string& subject, const std::string& why, const std::string& suffix,
                int rule) {
  if (width < 0) return;
  if (w_.fix(var, width, why + " at " + path_)) return;
  c_.report(path_ + suffix, subject + " must be " + str(width) + " wide (" + why + ") but is " + describe(var), rule,
            path_ + suffix + "|" + subject + "|" + str(rule));
}

void Flow::same(int a, int b, const std::string& sa, const std::string& sb, const std::string& why,
                const std::string& suffix) {
  if (w_.unify(a, b)) return;
  c_.report(path_ + suffix, sa + " is " + describe(a) + " but " + sb + " is " + describe(b) + "; " + why, 10,
            path_ + suffix + "|" + sa + "|" + sb);
}

int Flow::x(size_t j) { return j < in_.size() && in_[j] && !in_[j]->list ? in_[j]->var : w_.fresh(); }

std::string Flow::name(size_t j) { return j < ins_.size() ? "input " + detail::quoted(ins_[j]) : "input " + str(j); }

void Flow::fixed(int64_t width, const std::string& why) {
  const int v = w_.fresh();
  if (width >= 0) w_.fix(v, width, why + " at " + path_);
  out_.push_back({v});
}

void Flow::defer_vars(int a, int b, size_t input, const std::string& what) {
  deferred_.push_back({a, b, path_ + ".in[" + str(input) + "]", path_ + "|defer|" + str(input), what + " " + name(input), 10});
}

void Flow::defer(size_t a, size_t b, const std::string& what) { defer_vars(x(a), x(b), b, what); }

void Flow::divisible(int var, int64_t group) {
  divisible_.push_back({var, group});
  divisible_paths_.push_back(path_);
}

const Tensor* Flow::tensor(const std::string& tmpl, const std::string& suffix, int64_t expert) {
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

const Tensor* Flow::field_tensor(const char* key, int64_t expert) {
  if (!node_->contains(key) || !(*node_)[key].is_string()) return nullptr;
  return tensor((*node_)[key].get<std::string>(), std::string(".") + key, expert);
}

std::string Flow::tname(const std::string& tmpl, int64_t expert) {
  if (layer_ >= 0) return weight_name(tmpl, set_, expert);
  std::string s = tmpl;
  if (expert >= 0)
    for (size_t at; (at = s.find("{e}")) != std::string::npos;) s.replace(at, 3, std::to_string(expert));
  return s;
}

void Flow::bad_shape(const std::string& suffix, const std::string& name, const Tensor& t, const std::string& expected) {
  c_.report(path_ + suffix, "weight " + name + " is " + shape_str(t.shape) + " but " + expected, 18,
            path_ + suffix + "|shape|" + name);
}

void Flow::vector_weight(const char* key, int x, const std::string& subject) {
  if (const Tensor* t = field_tensor(key))
    need(x, t->numel(), subject, "size of " + desc(tname((*node_)[key]), *t), std::string(".") + key, 18);
}

std::string Flow::hidden_state_name() {
  // The hidden state between sections: the one name (not a list) that embed
  // defines, the block redefines and the head reads before defining it.
  std::set<std::string> embed, block, lists, head_reads, head_defs;
  for (const auto& n : c_.nodes("embed"))
    for (const auto& o : out_names(n)) {
      embed.insert(o);
      const IrOpDef* def = find_ir_op(n["op"].get<std::string>());
      if (def && def->makes_list) lists.insert(o);
      else lists.erase(o);
    }
  for (const auto& n : c_.nodes("block"))
    for (const auto& o : out_names(n)) block.insert(o);
  for (const auto& n : c_.nodes("head")) {
    for (const auto& x : detail::in_names(n))
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
  need(it->second.var, c_.doc["model"]["d"].get<int64_t>(), detail::quoted(h),
       std::string("model.d: the hidden state ") + (layer < 0 ? "leaving embed" : "leaving layer " + str(layer)), ".out");
}

void Flow::run() {
  for (const auto& name : input_names(c_.doc)) env_[name] = FlowValue(w_.fresh());
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
  const IrOpDef* def = find_ir_op(node["op"].get<std::string>());
  const std::string op = node["op"].get<std::string>();
  ins_ = detail::in_names(node);
  in_.clear();
  out_.clear();
  for (size_t j = 0; j < ins_.size(); ++j) {
    auto it = env_.find(ins_[j]);
    if (it == env_.end()) {
      // Where is it defined at all?
      std::string later;
      for (const char* s : kSections)
        for (size_t m = 0; m < c_.nodes(s).size() && later.empty(); ++m)
          for (const auto& o : out_names(c_.nodes(s)[m]))
            if (o == ins_[j]) later = node_path(s, m);
      c_.report(path_ + ".in[" + str(j) + "]",
                detail::quoted(ins_[j]) + " is read" + on_layer(layer) + " before any node defines it" +
                    (later.empty() ? " (no node defines it and it is not an input)"
                                   : " (it is first defined by " + later + ")"),
                4, path_ + "|in|" + ins_[j]);
      in_.push_back(nullptr);
      continue;
    }
    const FlowValue& v = it->second;
    const bool list_slot = def && def->reads_list && j == 0;
    if (v.list && !list_slot)
      c_.report(path_ + ".in[" + str(j) + "]",
                detail::quoted(ins_[j]) + " is a list; only append (first input) and depth_attend read lists", 6,
                path_ + "|list|" + str(j));
    if (!v.list && list_slot)
      c_.report(path_ + ".in[" + str(j) + "]", op + " needs a list here but " + detail::quoted(ins_[j]) + " is not one", 6,
                path_ + "|notlist|" + str(j));
    in_.push_back(&v);
  }
  if (def && def->widths) def->widths(*this);
  const auto outs = out_names(node);
  for (size_t j = 0; j < outs.size(); ++j) {
    FlowValue v = j < out_.size() ? out_[j] : FlowValue(w_.fresh());
    v.where = path_;
    v.layer = layer;
    env_[outs[j]] = v;
  }
}

void check_flow(Checker& c) { Flow(c).run(); }

}  // namespace bonfire::ir::detail
