// The IR op table: every group of ir/ops/ registers here, once.
#include "ir/op_table.h"

#include <algorithm>

namespace bonfire::ir {

const std::vector<IrOpDef>& ir_op_table() {
  static const std::vector<IrOpDef> ops = [] {
    std::vector<IrOpDef> v;
    register_ir_basic_ops(v);
    register_ir_norm_ops(v);
    register_ir_linear_ops(v);
    register_ir_rope_ops(v);
    register_ir_attention_ops(v);
    register_ir_moe_ops(v);
    register_ir_depth_ops(v);
    register_ir_scan_ops(v);
    register_ir_program_ops(v);
    register_ir_ssd_ops(v);
    std::sort(v.begin(), v.end(), [](const IrOpDef& a, const IrOpDef& b) { return a.name < b.name; });
    return v;
  }();
  return ops;
}

const IrOpDef* find_ir_op(std::string_view name) {
  const auto& ops = ir_op_table();
  auto it = std::lower_bound(ops.begin(), ops.end(), name, [](const IrOpDef& a, std::string_view n) { return a.name < n; });
  return it != ops.end() && it->name == name ? &*it : nullptr;
}

}  // namespace bonfire::ir
