// The IR op table (docs/IR.md §6, "Adding an op"). Every op kind a document
// may use is one IrOpDef: how many inputs and outputs it has, the state it
// keeps, its own validation rules, how it carries widths and checks weights
// through a document, and how it lowers to protocol ops. The validator
// (validate*.cpp) and the lowering (lower*.cpp) walk documents and look each
// node's op up here; neither branches on op names. A test holds the table's
// names equal to the schema's op enum (spec/ir.schema.json).
//
// An op's definition lives in one file under ir/ops/ (an op or a small group
// of related ops), which also registers it: op_table.cpp lists the groups.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ir/lowerer.h"
#include "ir/validate_internal.h"
#include "ir/width_flow.h"

namespace bonfire::ir {

// The state slot kind an op keeps its state in (R8).
enum class SlotKind { None, Kv, Recurrent };

struct IrOpDef {
  std::string name;

  // R6: `in` lists min_inputs..max_inputs names (max_inputs -1: no limit).
  // inputs_text replaces the generated "N" / "at least N" in the message;
  // inputs_of, when set, gives the exact count the node needs instead.
  int min_inputs = 1;
  int max_inputs = 1;
  const char* inputs_text = nullptr;
  size_t (*inputs_of)(const json& node) = nullptr;

  // R5: the names `out` lists when it is an array (nullptr: a single name),
  // and how the message says it ("one per size (3)").
  size_t (*outputs_of)(const json& node, std::string& why) = nullptr;

  SlotKind state = SlotKind::None;  // the slot kind `state` must name
  // An op the v1 schema does not have: the IR extension that adds it
  // (extensions.h), which a document using the op must declare.
  const char* extension = nullptr;
  bool reads_list = false;          // in[0] is a list (R6); no other input is
  bool makes_list = false;          // defines a list value (list, append)

  // Weight fields besides the shared ones (weight, bias, tied_to, router, ...)
  // whose names R7 checks: ssm_scan's a, b, c, d.
  std::vector<std::string> weight_keys;

  // The op's own rules, per node (R9, R11, R13, R14, R15, R16): nullptr for none.
  void (*check)(detail::Checker& c, const std::string& section, size_t index, const json& node) = nullptr;
  // Widths (R10) and weights (R18) on one layer: fix or relate the output
  // widths to the inputs', check the weights the node names.
  void (*widths)(detail::Flow& f) = nullptr;
  // The protocol nodes for one application of the node: one Value per `out` name.
  std::vector<Value> (*lower)(Lowerer& L) = nullptr;
};

// An op of `inputs` inputs and one output with no rules of its own.
inline IrOpDef ir_op(const char* name, int inputs, void (*widths)(detail::Flow&), std::vector<Value> (*lower)(Lowerer&)) {
  IrOpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = inputs;
  d.widths = widths;
  d.lower = lower;
  return d;
}

// The op named `name`, or nullptr.
const IrOpDef* find_ir_op(std::string_view name);
// Every op, sorted by name.
const std::vector<IrOpDef>& ir_op_table();

// x * c for c one value per row: the protocol broadcasts rows only (ops/basic.cpp).
std::string mul_column(Lowerer& L, const std::string& x, const std::string& c);

// The groups (ir/ops/*.cpp) append their definitions.
void register_ir_basic_ops(std::vector<IrOpDef>& ops);      // elementwise ops, affine, mul_col
void register_ir_norm_ops(std::vector<IrOpDef>& ops);       // rmsnorm, layernorm, scale, rms_row
void register_ir_linear_ops(std::vector<IrOpDef>& ops);     // embedding, pos_embedding, linear, split
void register_ir_rope_ops(std::vector<IrOpDef>& ops);       // rope
void register_ir_attention_ops(std::vector<IrOpDef>& ops);  // attention, mla_attention
void register_ir_moe_ops(std::vector<IrOpDef>& ops);        // moe_ffn
void register_ir_depth_ops(std::vector<IrOpDef>& ops);      // list, append, depth_attend, depth_route
void register_ir_scan_ops(std::vector<IrOpDef>& ops);       // conv1d_causal, linear_attention, ssm_scan, selective_scan
void register_ir_program_ops(std::vector<IrOpDef>& ops);    // expr, recurrence
void register_ir_ssd_ops(std::vector<IrOpDef>& ops);        // ssd_scan (extension ssd_scan)

}  // namespace bonfire::ir
