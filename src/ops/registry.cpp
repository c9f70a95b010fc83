#include <algorithm>
#include <cmath>

#include "core/json_parse.h"
#include "ops/moe_qmoe_internal.h"
#include "ops/op.h"

namespace bonfire {

int64_t Params::int_(const char* k) const {
  const std::optional<int64_t> v = whole_number(j_->at(k), kMaxIntParam);
  if (!v)
    bad_graph(std::string("param ") + k + " must be an integer of magnitude at most " + std::to_string(kMaxIntParam) +
              ", got " + dump_json(j_->at(k)));
  return *v;
}

const ParamDef* OpDef::param(std::string_view n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

void check_f32(const std::vector<TensorDesc>& in, size_t i, const char* what) {
  if (i < in.size() && in[i].dtype != DType::F32)
    bad_graph(std::string(what) + " must be f32, got a packed " + dtype_name(in[i].dtype) + " tensor");
}

void register_extension_ops(std::vector<OpDef>& ops) {
  std::vector<OpDef> ext;
  register_ext_scan_ops(ext);
  register_ext_expr_ops(ext);
  register_ext_ring_attention_ops(ext);
  register_ext_qmoe_ops(ext);  // ops/moe_qmoe.cpp
  for (auto& op : ext) {
    op.extension = true;
    ops.push_back(std::move(op));
  }
}

const std::vector<OpDef>& op_registry() {
  static const std::vector<OpDef> ops = [] {
    std::vector<OpDef> v;
    register_elementwise_ops(v);
    register_norm_ops(v);
    register_reduce_ops(v);
    register_shape_ops(v);
    register_matmul_ops(v);
    register_conv_ops(v);
    register_rope_ops(v);
    register_attention_ops(v);
    register_moe_ops(v);
    register_sample_ops(v);
    register_extension_ops(v);
    std::sort(v.begin(), v.end(), [](const OpDef& a, const OpDef& b) { return a.name < b.name; });
    return v;
  }();
  return ops;
}

const OpDef* find_op(std::string_view name) {
  const auto& ops = op_registry();
  auto it = std::lower_bound(ops.begin(), ops.end(), name,
                             [](const OpDef& a, std::string_view n) { return a.name < n; });
  return it != ops.end() && it->name == name ? &*it : nullptr;
}

}  // namespace bonfire
