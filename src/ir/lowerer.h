// The lowering's working state: the graph being built, the IR names in
// scope, and the node being lowered. lower.cpp walks the document and hands
// each node to its op's `lower` (op_table.h, ir/ops/*.cpp), which emits
// protocol nodes through the methods below; lower_stages.cpp cuts the walk
// to a pipeline stage's layers.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/ir_doc.h"
#include "ir/lower.h"

namespace bonfire::ir {

// An IR value in the graph: a reference ("L0.q.3", "w:NAME", "tokens") and
// its width when known; or a list of values (list/append).
struct Value {
  Value() = default;
  Value(std::string r, int64_t w) : ref(std::move(r)), width(w) {}
  std::string ref;
  int64_t width = -1;
  bool is_list = false;
  std::vector<Value> items;
};

class Lowerer {
 public:
  Lowerer(const json& doc, const LowerOptions& options, const WeightStore* weights);
  json run();

  // --- used by the op lowerings -------------------------------------------
  // Appends a node; returns its id.
  std::string emit(const std::string& op, const std::vector<std::string>& in, json params = json::object(),
                   const std::string& hint = "");
  // An inline constant weight; returns its reference ("w:...").
  std::string constant(const std::string& hint, const std::vector<float>& data, const std::vector<int64_t>& shape);
  [[noreturn]] void fail(const std::string& message) const;

  const json& field(const char* key) const;  // the node's field on this layer
  bool has(const char* key) const { return node_->contains(key) && !(*node_)[key].is_null(); }
  int64_t int_field(const char* key, int64_t dflt) const;
  double num_field(const char* key, double dflt) const;
  std::string str_field(const char* key, const std::string& dflt) const;

  // "w:<name>" for a weight template of this node ({i}, {e} replaced);
  // fails naming the tensor when a checkpoint is given and lacks it.
  std::string weight(const std::string& tmpl, int64_t expert = -1) const;
  const Tensor* weight_tensor(const std::string& tmpl, int64_t expert = -1) const;
  Value input(size_t i) const;  // the node's in[i]
  size_t input_count() const;
  int64_t width_of(const Value& v, const char* what) const;  // fails when unknown

  // The session tensor for this layer's slot; in a prefill that allocates,
  // a zeros node of `shape` that is retained at the end of the call.
  std::string state(const std::string& slot, const std::string& tensor, const std::vector<int64_t>& shape);
  // The slot's tensors as session references, in the slot's order (state()).
  std::vector<std::string> slot_states(const json& slot);
  // After a node wrote a state tensor in place: later readers (and the
  // retain of an allocating prefill) use `ref`.
  void state_written(const std::string& slot, const std::string& tensor, const std::string& ref);
  // The current reference to another layer's state (cross-layer sharing).
  std::string state_of_layer(int64_t layer, const std::string& slot, const std::string& tensor) const;
  const json& slot(const std::string& name) const;  // fails when missing
  int64_t cache_rows(const json& slot) const;       // max_len capped at the session's ctx
  std::string expr_plus_tokens(const std::string& base) const;  // "pos + T"

  const json& doc() const { return doc_; }
  const LowerOptions& options() const { return opt_; }
  // The rows of the values being lowered: T, but 1 in the head when it runs
  // on the last row only (run() cuts what it reads).
  int64_t tokens() const { return in_head_ && !opt_.all_logits ? 1 : T_; }
  int64_t step_tokens() const { return T_; }  // T, wherever the node is
  int64_t layer() const { return layer_; }
  bool allocating() const { return allocate_; }
  // True while the sections before a stage are walked only for the values
  // they leave (names, lists, widths): what is emitted then is dropped, so
  // a weight the stage's worker does not hold is no error.
  bool skipping() const { return skipping_; }

  // --- pipeline stages (lower_stages.cpp) ------------------------------------
  // Walks embed and the layers before first_layer, then replaces what they
  // defined by the carry inputs; returns those inputs.
  std::vector<CarryValue> skip_to_stage(std::vector<int64_t>& applications);

 private:
  void lower_section(const json& nodes, const std::string& section);
  void lower_layers(int64_t from, int64_t to, std::vector<int64_t>& applications);
  void lower_node(const json& node);
  void define(const std::string& name, Value v) {
    head_rows_.erase(name);
    env_[name] = std::move(v);
  }
  void rename_node(const std::string& from, const std::string& to);
  void emit_outputs();
  std::vector<CarryValue> carry_at(int64_t boundary) const;
  void emit_carry_outputs();  // a stage that ends before the last layer

  const json& doc_;
  LowerOptions opt_;
  const WeightStore* weights_;
  int64_t T_ = 1;
  int64_t n_layers_ = 0;
  bool allocate_ = false;
  bool skipping_ = false;

  json nodes_ = json::array();
  json inline_weights_ = json::object();
  json retain_ = json::object();
  json outputs_ = json::array();
  std::map<std::string, Value> env_;
  std::map<std::string, std::string> state_refs_;  // session name -> current ref
  std::map<std::string, int> id_counts_;

  // The node being lowered.
  const json* node_ = nullptr;
  std::string path_;
  int64_t layer_ = -1;
  int64_t weight_set_ = 0;
  bool in_head_ = false;
  std::map<std::string, Value> head_rows_;  // values cut to their last row for the head
};

}  // namespace bonfire::ir
