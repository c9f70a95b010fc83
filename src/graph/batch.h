// Batched calls: one graph run for the rows of several sessions at once
// (continuous batching, docs/PROTOCOL-EXTENSIONS.md "Batched calls").
//
// The graph is the one a single session's step runs (a decode step, or a
// prefill chunk). Row r is that step for session r with its own bind (pos,
// step, ...); the call's inputs are the rows' inputs stacked on axis 0 in row
// order, and so are the outputs. The promise: every row's outputs and session
// writes are exactly those its own call would give. The weights are read
// once for all rows: a node whose op is row-wise (OpDef::rows) and whose
// params are the same for every row runs once over the stacked rows; every
// other node (rope at the row's position, the cache writes, attention over
// the row's own cache, sampling with the row's seed and step) runs per row,
// on that row's slice, the rows side by side on the worker's threads (one
// row a thread; an op's result does not depend on how many threads run it),
// and consecutive per-row nodes run as one pass over the rows. The products
// of a batched call take the per-row dot path up to 16 rows (ops/gemm.h
// BatchRowsScope), so a row's logits do not depend on how many rows share
// the call.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "graph/executor.h"

namespace bonfire {

// The feature a worker announces when it takes batched calls (a "run"
// message with "rows"); the coordinator sends them only to such workers.
inline constexpr const char* kBatchedCalls = "ext.rows";

struct BatchRow {
  Session* session = nullptr;  // the row's session (its caches), never shared between rows
  nlohmann::json bind;         // the row's bind values
};

// Throws what the single call would (naming the row: "row 3: ..."), plus
// bad_graph when an input's leading axis is not a multiple of the rows or
// the graph writes a tensor the rows would share. A refused call writes
// nothing; a call that fails while running may have advanced some rows'
// caches (as a failed single call may).
// A batched call's "rows" as the worker link carries them:
// [{"session": id, "bind": {...}}, ...], 1 to `max_rows` distinct non-empty
// sessions. Throws Error(BadGraph) naming the row that is wrong.
void parse_batch_rows(const nlohmann::json& rows, size_t max_rows, std::vector<std::string>& sessions,
                      std::vector<nlohmann::json>& binds);

RunResult run_graph_rows(const Graph& g, const std::map<std::string, Tensor>& stacked_inputs,
                         const std::vector<BatchRow>& rows, const WeightLookup& weights, const Limits& limits);

}  // namespace bonfire
