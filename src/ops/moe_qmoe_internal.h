// Between ops/moe.cpp and ops/moe_qmoe.cpp: moe's layout "qmoe".
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "ops/op.h"

namespace bonfire {

// The QMoE package attributes a moe node with layout "qmoe" means; throws
// bad_graph for what the layout cannot express.
nlohmann::json moe_qmoe_attrs(const std::vector<TensorDesc>& in, const Params& p);
Shape infer_moe_qmoe(const std::vector<TensorDesc>& in, const Params& p);
void run_moe_qmoe(const OpInputs& in, const Params& p, Tensor& out);
// The extension op `qmoe` (registered by register_extension_ops).
void register_ext_qmoe_ops(std::vector<OpDef>& ops);

}  // namespace bonfire
