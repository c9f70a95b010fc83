// The QMoE kernel package as the op table sees it.
//
// Two graph ops run ONNX Runtime's QMoE (spec/kernels/qmoe.json, docs/QMOE.md):
// the v3 op `moe` with the extension value layout "qmoe" (feature
// ext.moe.qmoe) and the extension op `qmoe` (feature ext.qmoe), which takes
// the package's six tensors and attributes as they are. Both run through the
// package runtime, the same check/select/run path as `bonfire kernel run`.
//
// Layering: ops come before kernels (spec → core → ops → graph → kernels →
// ...), so this layer cannot call the package runtime. It declares the
// interface (QmoeBackend) and keeps a pointer the kernels layer fills in
// (kernels::install_graph_ops(), src/kernels/graph_ops.cpp). The ops stay in
// the static op table, so the manifest test and feature announcement see
// them; until a backend is installed both refuse with unsupported_feature
// naming their feature. The kernels layer installs it from a static
// initialiser in src/kernels/runtime.cpp, i.e. in every binary that links
// the package runtime (bonfire, its tests and benches), and on every call of
// install_graph_ops().
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "core/tensor.h"

namespace bonfire {

// Tensors in the package's role order: input, router_probs,
// fc1_experts_weights, fc1_scales, fc2_experts_weights, fc2_scales. Weights
// are u8; scales f32, or f16/bf16 (widened to f32 for the package).
struct QmoeBackend {
  // Checks the call against the package (attributes, dtypes, ranks, the
  // contract); throws Error(BadGraph) naming the attribute or tensor.
  void (*check)(const nlohmann::json& attrs, const std::vector<TensorDesc>& in);
  // Runs the call; `out` is allocated f32 with the input's shape.
  void (*run)(const nlohmann::json& attrs, const std::vector<const Tensor*>& in, Tensor& out);
};

void set_qmoe_backend(const QmoeBackend* backend);
const QmoeBackend* qmoe_backend();  // null until the kernels layer installed one

// The package's input roles, in order.
extern const char* const kQmoeRoles[6];

}  // namespace bonfire
