// The op table. Every op of protocol v3 is one OpDef: its arity, its params
// and features as the manifest (spec/ops-v3.json) lists them, a shape function
// and a compute function. The graph layer only ever talks to ops through this
// table; a test holds it equal to the manifest. Protocol extension ops
// (docs/PROTOCOL-EXTENSIONS.md) live in the same table marked `extension`;
// they are not in the manifest and each is routed by its own `ext.` feature.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace bonfire {

using json = nlohmann::json;

// The manifest's param types; a trailing '?' there means optional.
enum class ParamType { Number, Bool, String, Array, Object };
struct ParamDef {
  std::string name;
  ParamType type;
  bool optional;
};

// A node uses a feature when it sets one of `params`, or passes input
// `input` (an optional input such as attention's bias), or always when
// `always` is set (an extension op's own feature: the op itself).
// With `value` set, the node uses the feature only when its (single) param
// in `params` is that string: a param value that is itself an extension
// (moe's layout "qmoe", feature ext.moe.qmoe). Such features are named `ext.`
// and are not in the manifest (docs/PROTOCOL-EXTENSIONS.md).
// `neutral`, when set, says whether the node's literal params ask nothing of
// the feature after all: the manifest's "an epsilon other than the 1e-5
// default" is not used by `"eps": 1e-5`, so a worker without the feature
// can run that node.
struct FeatureDef {
  std::string name;
  std::vector<std::string> params;
  int input = -1;
  bool always = false;
  std::string value = {};  // (an initializer: aggregate inits that omit it stay warning-free)
  bool (*neutral)(const nlohmann::json& params) = nullptr;
};

// The largest integer param (positions, offsets, lengths, sizes) an op
// takes: 2^31 - 1, so that sums and products of two stay far inside int64
// and a graph cannot wrap a bounds check around.
constexpr int64_t kMaxIntParam = (int64_t{1} << 31) - 1;

// A node's params after bind expressions were evaluated: every number-typed
// param is a JSON number here. Defaults live in the op code, as the manifest
// states them. Immutable and shared: a copy costs a reference count, so a
// node without expressions hands every call (and every row of a batched
// call) the same params instead of a fresh JSON object each.
class Params {
 public:
  Params() : j_(empty()) {}
  explicit Params(json j) : j_(std::make_shared<const json>(std::move(j))) {}
  bool has(const char* k) const { return j_->contains(k) && !(*j_)[k].is_null(); }
  double num(const char* k) const { return j_->at(k).get<double>(); }
  double num(const char* k, double dflt) const { return has(k) ? num(k) : dflt; }
  // A number that must be integral, of magnitude at most kMaxIntParam.
  int64_t int_(const char* k) const;
  int64_t int_(const char* k, int64_t dflt) const { return has(k) ? int_(k) : dflt; }
  bool flag(const char* k, bool dflt) const { return has(k) ? j_->at(k).get<bool>() : dflt; }
  std::string str(const char* k, const std::string& dflt) const {
    return has(k) ? j_->at(k).get<std::string>() : dflt;
  }
  const json* get(const char* k) const { return has(k) ? &j_->at(k) : nullptr; }
  const json& all() const { return *j_; }

 private:
  static const std::shared_ptr<const json>& empty() {
    static const std::shared_ptr<const json> e = std::make_shared<const json>(json::object());
    return e;
  }
  std::shared_ptr<const json> j_;
};

// Inputs as the compute function sees them. Only the inputs an op declares in
// `mutates_input` / `writes_inputs` may be written through.
using OpInputs = std::vector<Tensor*>;

// How a batched call (graph/batch.h: one call for the rows of several
// sessions, stacked on axis 0) may run the op once for all rows instead of
// once per row. An op is row-wise when row i of its output depends only on
// row i of its stacked inputs and its params are the same for every row.
enum class RowRule {
  None,          // run per row (positions, caches, shapes, sampling, reductions)
  Elementwise,   // every non-shared input stacked with one shape; shared ones broadcast
  FirstOperand,  // input 0 stacked [rows, ..., K] (rank >= 2), the rest shared (weights)
  Gather,        // input 0 holds ids (any rank), the rest shared (a table)
};

struct OpDef {
  std::string name;
  int min_inputs = 0;
  int max_inputs = 0;
  std::vector<ParamDef> params;
  std::vector<FeatureDef> features;
  // Validates inputs and params; returns the output shape or throws bad_graph.
  Shape (*infer)(const std::vector<TensorDesc>& in, const Params& p) = nullptr;
  // Fills `out`, already allocated with the inferred shape (or, for a
  // mutating op, the mutated input itself).
  void (*run)(const OpInputs& in, const Params& p, Tensor& out) = nullptr;
  // Optional: the output's dtype when it can be packed (a slice of a packed
  // weight stays packed). Then `out` arrives unallocated and run() makes it
  // a view of the input. Unset means f32.
  DType (*out_dtype)(const std::vector<TensorDesc>& in, const Params& p) = nullptr;
  // Optional: runs several nodes of this op at once that read the same
  // input 0 and only weights besides (a layer's q, k and v products), each
  // out[i] filled as run(in[i], p[i], *out[i]) fills it (graph/executor's
  // sibling_count finds them).
  void (*run_siblings)(const std::vector<OpInputs>& in, const std::vector<Params>& p,
                       const std::vector<Tensor*>& out) = nullptr;
  int mutates_input = -1;  // the output is this input, written in place (cache_write)
  // Bit i: input i is also advanced in place (short_conv's state, a scan's
  // state tensors). The manifest's `writesInput` is one such bit.
  uint64_t writes_inputs = 0;
  // When the written inputs depend on the node (recurrence: its last
  // len(state) inputs), this gives the mask instead of `writes_inputs`.
  uint64_t (*writes_inputs_of)(const Params& p, size_t n_inputs) = nullptr;
  uint32_t packed_inputs = 0;  // bit i: input i may be a packed weight; bit 31 covers i >= 31
  // The output may be a view of input 0 when that input is a weight (w:),
  // which nothing writes: `out` then arrives unallocated and run() either
  // makes it a view or allocates it (a slice of rows of an f32 weight costs
  // no copy).
  bool views_weight = false;
  bool extension = false;      // a protocol extension op, not in spec/ops-v3.json
  RowRule rows = RowRule::None;

  bool accepts_packed(int i) const { return (packed_inputs >> (i < 31 ? i : 31)) & 1u; }
  // Whether input i of a node with these (bound) params is written in place.
  bool writes(int i, const Params& p, size_t n_inputs) const {
    const uint64_t m = writes_inputs_of ? writes_inputs_of(p, n_inputs) : writes_inputs;
    return i >= 0 && i < 64 && ((m >> i) & 1u);
  }
  const ParamDef* param(std::string_view name) const;
};

// All ops, sorted by name.
const std::vector<OpDef>& op_registry();
const OpDef* find_op(std::string_view name);

// Shape-function helpers: throw bad_graph with `msg` unless `cond`. Checks
// run on every call (and every row of a batched one), so a message costs
// nothing until it is needed: a literal stays a pointer, and a built one is
// written as a function returning it, `check(ok, [&] { return "..." + n; })`.
inline void check(bool cond, const std::string& msg) {
  if (!cond) bad_graph(msg);
}
inline void check(bool cond, const char* msg) {
  if (!cond) bad_graph(msg);
}
template <class F, class = std::enable_if_t<std::is_invocable_r_v<std::string, F>>>
inline void check(bool cond, F&& msg) {
  if (!cond) bad_graph(msg());
}
// Input i must be f32 (activations are never packed).
void check_f32(const std::vector<TensorDesc>& in, size_t i, const char* what);

// Each op group registers its ops here (one file per group under ops/).
void register_elementwise_ops(std::vector<OpDef>& ops);
void register_norm_ops(std::vector<OpDef>& ops);
void register_reduce_ops(std::vector<OpDef>& ops);
void register_shape_ops(std::vector<OpDef>& ops);
void register_matmul_ops(std::vector<OpDef>& ops);
void register_conv_ops(std::vector<OpDef>& ops);
void register_rope_ops(std::vector<OpDef>& ops);
void register_attention_ops(std::vector<OpDef>& ops);
void register_moe_ops(std::vector<OpDef>& ops);
void register_sample_ops(std::vector<OpDef>& ops);
// Protocol extension ops (docs/PROTOCOL-EXTENSIONS.md): register_extension_ops
// adds both groups below and marks every op it adds `extension`.
void register_extension_ops(std::vector<OpDef>& ops);
void register_ext_scan_ops(std::vector<OpDef>& ops);  // ops/ext_scan.cpp
void register_ext_expr_ops(std::vector<OpDef>& ops);  // ops/ext_expr.cpp
void register_ext_ring_attention_ops(std::vector<OpDef>& ops);  // ops/ring_attention.cpp

// An extension op's own feature: every node of the op uses it.
inline FeatureDef ext_feature(const char* name) {
  FeatureDef f;
  f.name = name;
  f.always = true;
  return f;
}

}  // namespace bonfire
