// Graph ops of protocol v3 (spec/ops-v3.json) as WebGPU plans (gpu_plan.h):
// one node, its inputs as buffers, one WGSL pass (src/kernels/gpu_ops/wgsl/)
// writing its f32 output. One table holds the ops that have a GPU kernel;
// the browser worker's GPU path is built from these (issue 18), and the ops
// goldens check each in chromium (tests/web/webgpu.test.mjs).
//
// Promises:
// - the output shape and the arithmetic are the CPU op's (src/ops/), to the
//   ops goldens' tolerances;
// - anything a kernel here does not do (an op without one, a param it does
//   not know or a bind expression not yet resolved to a number, a dtype it
//   cannot read, a rank over 4 where it broadcasts) is
//   Error(UnsupportedFeature) naming the op and what, so the caller runs the
//   node on the CPU; shapes the op itself refuses are Error(BadGraph).
//
// Input dtypes: "float32", and for weights (matmul's b, embedding's table)
// also the stored formats "float16", "bfloat16", "q8_0", "q4_0" (GGUF's
// blocks of 32 along the last axis), bound as they are stored.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/gpu_plan.h"

namespace bonfire::kernels {

struct GpuValue {
  std::string id;     // the buffer's id in the plan
  std::string dtype;  // see above
  std::vector<int64_t> shape;
};

GpuPlan plan_gpu_node(const std::string& op, const nlohmann::json& params, const std::vector<GpuValue>& inputs,
                      const std::string& output_id, const Device& device, const TemplateRenderer& render);

// The ops that have a GPU kernel, in table order.
std::vector<std::string> gpu_op_names();

}  // namespace bonfire::kernels
