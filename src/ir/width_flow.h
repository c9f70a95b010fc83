// Values through a document, section by section and layer by layer (§2),
// for the rules R4 (names are defined before they are read), R6 (lists are
// read only by the ops that take them), R10 (widths agree) and R18 (weights
// exist and fit, with a checkpoint). validate_flow.cpp walks the document;
// each op's `widths` (op_table.h) says what one application of a node does
// to widths, through the methods below.
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
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/validate_internal.h"
#include "model/weights.h"

namespace bonfire::ir::detail {

class Widths {
 public:
  int fresh();
  int find(int v);
  int64_t width(int v) { return vars_[find(v)].width; }
  const std::string& origin(int v) { return vars_[find(v)].origin; }
  // False (and nothing changes) when v already has another width.
  bool fix(int v, int64_t w, const std::string& origin);
  bool unify(int a, int b);

 private:
  struct Var {
    int parent;
    int64_t width;
    std::string origin;
  };
  std::vector<Var> vars_;
};

struct FlowValue {
  FlowValue() = default;
  FlowValue(int v, bool is_list = false) : var(v), list(is_list) {}
  int var = -1;       // width variable (a list: its elements' width)
  bool list = false;
  std::string where;  // the node that defined it ("" for inputs)
  int64_t layer = -1;  // the layer that defined it (-1: embed, head, inputs)
};

class Flow {
 public:
  explicit Flow(Checker& c) : c_(c) {}
  void run();

  // --- for the ops' `widths` (the node being processed) ----------------------
  const json& node() const { return *node_; }
  const std::string& path() const { return path_; }
  size_t inputs() const { return in_.size(); }
  const FlowValue* in(size_t j) const { return in_[j]; }
  const std::vector<std::string>& in_names() const { return ins_; }
  std::optional<int64_t> i(const char* key) { return int_field(*node_, key, layer_); }
  Widths& w() { return w_; }

  int x(size_t j);                 // input j's width variable (a fresh one when absent or a list)
  std::string name(size_t j);      // "input \"q\"", for messages
  void same_width(int v) { out_.push_back({v}); }  // the next output is v wide
  void fixed(int64_t width, const std::string& why);  // the next output is `width` wide (-1: unknown)
  void out(FlowValue v) { out_.push_back(v); }
  int last_out() const { return out_.back().var; }
  // Input b must be as wide as input a, or 1 (checked at the end).
  void defer(size_t a, size_t b, const std::string& what);
  void defer_vars(int a, int b, size_t input, const std::string& what);
  // `var` (the value `subject`) must be `width` wide because of `why`.
  void need(int var, int64_t width, const std::string& subject, const std::string& why, const std::string& suffix,
            int rule = 10);
  void same(int a, int b, const std::string& sa, const std::string& sb, const std::string& why, const std::string& suffix);
  void divisible(int var, int64_t group);  // grouped rmsnorm: the width is a multiple of group
  std::string describe(int var);

  // A weight the node names, resolved for this layer (and expert); null when
  // there is no checkpoint, the name has placeholders left (R7) or the
  // tensor is missing (reported).
  const Tensor* tensor(const std::string& tmpl, const std::string& suffix, int64_t expert = -1);
  const Tensor* field_tensor(const char* key, int64_t expert = -1);
  bool has_weights() const { return c_.weights != nullptr; }
  size_t weight_count() const { return c_.weights ? c_.weights->size() : 0; }
  // The tensor name a template stands for here ({i} only inside the block).
  std::string tname(const std::string& tmpl, int64_t expert = -1);
  std::string tname(const json& tmpl, int64_t expert = -1) { return tname(tmpl.get<std::string>(), expert); }
  std::string desc(const std::string& name, const Tensor& t) { return "weight " + name + " " + shape_str(t.shape); }
  void bad_shape(const std::string& suffix, const std::string& name, const Tensor& t, const std::string& expected);
  // A vector weight (norm, scale) of the input's width.
  void vector_weight(const char* key, int x, const std::string& subject);

 private:
  struct Deferred {
    int a, b;  // b must be as wide as a, or 1
    std::string path, key, message;  // message: "add's second input ..."
    int rule;
  };

  void process(const std::string& sec, size_t k, const json& node, int64_t layer, int64_t set);
  void hidden_state_check(const std::string& h, int64_t layer);
  std::string hidden_state_name();

  Checker& c_;
  Widths w_;
  std::map<std::string, FlowValue> env_;
  std::vector<Deferred> deferred_;
  std::vector<std::pair<int, int64_t>> divisible_;  // (var, group) for grouped rmsnorm
  std::vector<std::string> divisible_paths_;
  std::map<std::string, std::pair<size_t, int>> missing_;  // field path -> (problem index, more missing tensors)
  std::set<std::string> missing_names_;

  // The node being processed.
  std::string path_, sec_;
  const json* node_ = nullptr;
  int64_t layer_ = -1, set_ = -1;
  std::vector<std::string> ins_;
  std::vector<const FlowValue*> in_;
  std::vector<FlowValue> out_;
};

}  // namespace bonfire::ir::detail
