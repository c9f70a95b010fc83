// Runs a parsed graph. Two passes: first every node's params are bound and
// its output shape inferred and checked against the limits (nothing is
// allocated and no session is touched, so a refused call changes nothing);
// then the nodes run in order, each buffer going back to a pool once its last
// reader has run.
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "graph/graph.h"
#include "graph/session.h"

namespace bonfire {

// Finds a weight by name (inline first, then the model's); null if absent.
using WeightLookup = std::function<const Tensor*(const std::string& name)>;

struct RunResult {
  std::map<std::string, Tensor> outputs;  // by the name the call asked for
  double ms = 0;
  int64_t nodes_once = 0;  // a batched call's nodes that ran once for all rows (graph/batch.h)
};

RunResult run_graph(const Graph& g, const std::map<std::string, Tensor>& inputs, const nlohmann::json& bind,
                    const WeightLookup& weights, Session* session, const Limits& limits);

// The first pass alone, for a runner that executes the nodes elsewhere (the
// browser worker's WebGPU steps, kernels/gpu_step.h): each node's bound
// params and output, every limit checked, nothing run. Session tensors held
// on a device (graph/session.h) count by their shape.
struct PlannedNode {
  Params params;
  TensorDesc out;
};
std::vector<PlannedNode> plan_graph(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                    const nlohmann::json& bind, const WeightLookup& weights, Session* session,
                                    const Limits& limits);

// Runs node i of `g` on the CPU as run_graph would, given its inputs (in
// the node's order) and its plan; `out` gets a fresh buffer, or is the
// mutated input.
void run_planned_node(const Graph& g, size_t i, const PlannedNode& plan, const OpInputs& in, Tensor& out);

// A node's params for one call: its literal ones, with those written as
// expressions evaluated against the call's `bind`.
Params bind_params(const GraphNode& node, const nlohmann::json& bind);

// Convenience for a whole call: inline weights, then `model_weights`.
RunResult run_call(const Call& call, Session* session, const Limits& limits,
                   const WeightLookup& model_weights = nullptr);

// Every feature the manifest names, plus the `ext.` feature of every protocol
// extension op (docs/PROTOCOL-EXTENSIONS.md); this engine implements them all.
std::set<std::string> implemented_features();

// Throws Error(UnsupportedFeature) naming the first feature the graph uses
// that `available` lacks (a worker that declared fewer features, or a
// network where no worker has it).
void require_features(const Graph& g, const std::set<std::string>& available);

}  // namespace bonfire
