// What the two runners (executor.cpp: one call; batch.cpp: one call for many
// sessions' rows) share: the plan pass, the buffer pool, one node's run.
// Not part of the graph layer's interface.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "graph/executor.h"
#include "graph/graph.h"

namespace bonfire::detail {

// f32 buffers handed back when their last reader has run, taken again by
// later nodes of a similar size; only buffers nobody else holds come here.
// One pool per thread lives across calls, so a decode step reuses the
// previous step's buffers instead of asking malloc (and the kernel, for the
// large ones) again; it keeps at most kCachedBytes between calls.
class BufferPool {
 public:
  static constexpr size_t kCachedBytes = size_t{256} << 20;
  Tensor take(const Shape& shape);
  void give(Tensor& t);
  void trim();  // between calls: the largest buffers go first until under the cap

 private:
  static size_t bytes_for(const Shape& s) { return (std::max<int64_t>(1, shape_numel(s)) * 4 + 63) / 64 * 64; }
  std::multimap<size_t, std::shared_ptr<void>> free_;
  size_t held_ = 0;
};
BufferPool& thread_buffer_pool();

using Planned = PlannedNode;  // graph/executor.h

// The description of a value from outside the nodes (input, weight, session
// tensor); throws when it does not exist.
using ExternalDesc = std::function<TensorDesc(const Ref& r, const std::string& node)>;

// Where a reference's value lives before the run (an input, a weight, a
// session tensor; not a node). Throws when it does not exist, or when
// `need_data` and it is a session tensor held on a device.
const Tensor* external_value(const Ref& r, const std::string& node, const std::map<std::string, Tensor>& inputs,
                             const WeightLookup& weights, Session* session, bool need_data);

// Pass 1 of a plain call (every input given, then plan_nodes over the
// call's external values); `need_data` as above.
std::vector<Planned> plan_call(const Graph& g, const std::map<std::string, Tensor>& inputs, const nlohmann::json& bind,
                               const WeightLookup& weights, Session* session, const Limits& limits, bool need_data,
                               int64_t* total_bytes);

// Whether node `node` writes a buffer of its own (prepare_output's second
// case): f32, not in place, not a view of a weight.
bool output_is_buffer(const GraphNode& node, const TensorDesc& desc);

// Gives `out` what node `node` writes into: the mutated input, a buffer
// from `pool` (or a fresh one when null), or, for a packed output, only its
// dtype and shape (the op makes it a view).
void prepare_output(const GraphNode& node, const TensorDesc& desc, const OpInputs& in, Tensor& out, BufferPool* pool);

// Pass 1: binds every node's params, infers and checks its output shape and
// the limits, adding the f32 bytes it allocates to `*total_bytes`. Nothing
// is written. `like`, when given, is the plan of another row of the same
// batched call (the same inputs and weights, another bind and session): a
// node it already planned the same way is copied from it, not planned again.
std::vector<Planned> plan_nodes(const Graph& g, const nlohmann::json& bind, const ExternalDesc& external,
                                const Limits& limits, int64_t* total_bytes, const std::vector<Planned>* like = nullptr);

// When each node's value may go back to the pool: after node last_use[i]
// reads it (-1: nothing does), unless it is pinned (an output or retained).
struct Lifetimes {
  std::vector<int> last_use;
  std::vector<bool> pinned;
};
Lifetimes value_lifetimes(const Graph& g);

// Throws Timeout when the call's deadline has passed, before `node` runs.
void check_deadline(const Limits& limits, const GraphNode& node);

// Runs one node into `out` (already allocated, or the mutated input), with
// the profile hook and errors naming the node.
void run_node(const GraphNode& node, const OpInputs& in, const Params& params, Tensor& out);

// How many nodes from i on run together through their op's run_siblings:
// i and the nodes right after it of the same op, without expressions, that
// read the same input 0 and only weights besides (a layer's q, k and v
// products; its gate and up). 1 when none follow or the op has no such run.
size_t sibling_count(const Graph& g, size_t i);

// Runs nodes [i, i + in.size()) through run_siblings, as run_node runs one.
void run_siblings(const Graph& g, size_t i, const std::vector<OpInputs>& in, const std::vector<Params>& params,
                  const std::vector<Tensor*>& out);

}  // namespace bonfire::detail
