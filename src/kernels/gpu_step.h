// A whole graph call as a WebGPU step program: every node either a GPU
// dispatch (gpu_ops.h, its buffers named by the step's values) or a CPU node
// run in the worker's own engine, in graph order. The browser worker's
// runner (web/webgpu.js, runStep) executes it so that values stay in GPU
// buffers from one op to the next and cross to the CPU only where a CPU node
// reads them or the call returns them; KV caches stay on the GPU between
// calls (graph/session.h, on_device).
//
// Value ids: "n:ID" a node's output, "in:NAME" an input, "w:NAME" a weight,
// "s:NAME" a session tensor.
//
// Promises:
// - a node goes to the GPU only when gpu_ops has a kernel for it with these
//   shapes, dtypes and bound params, and its output is f32; otherwise it is a
//   CPU node and the item says why (the reason plan_gpu_node gave);
// - a GPU item's buffers are step values or its own constants ("n:ID#NAME",
//   with their words); shaders are shared by text across the step;
// - the program carries no tensor data: the runner asks the worker for a
//   value's bytes (inputs, weights, CPU nodes' outputs) when a GPU node reads
//   it, and hands back what a CPU node or the answer needs.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "kernels/device.h"
#include "kernels/gpu_plan.h"

namespace bonfire::kernels {

struct GpuStepValue {
  std::string from;   // "node", "input", "weight" or "state"
  std::string dtype;  // as gpu_ops.h names them ("float32", "q8_0", ...)
  std::vector<int64_t> shape;
  int64_t bytes = 0;  // as stored
};

struct GpuStepItem {
  size_t node = 0;              // index in the graph
  std::string id;               // the node's id
  bool gpu = false;
  std::vector<std::string> in;  // value ids, in the node's order
  std::string out;              // "n:ID"
  GpuPlan plan;                 // gpu: the dispatches (shaders moved to GpuStep::shaders)
  std::string why_cpu;          // !gpu: what kept it off the GPU
};

struct GpuStep {
  std::map<std::string, GpuStepValue> values;
  std::map<std::string, std::string> shaders;  // key -> WGSL, one key per distinct text
  std::vector<GpuStepItem> items;
  std::vector<std::pair<std::string, std::string>> outputs;  // the call's output name -> value id
  // Session tensor name -> value id: the call's retain, and the session
  // tensors a mutating op (cache_write) wrote in place.
  std::map<std::string, std::string> retain;
  int gpu_nodes() const;
  nlohmann::json to_json() const;
};

// The value id of a reference ("n:", "in:", "w:", "s:" as above).
std::string gpu_value_id(const Graph& g, const Ref& r);

// A renderer that renders each (template, variables) once and then answers
// from memory: a decode step renders the same few shaders for every layer.
TemplateRenderer memoized_renderer(TemplateRenderer render);

// `plan` is plan_graph's for this call; `external` describes inputs, weights
// and session tensors.
GpuStep plan_gpu_step(const Graph& g, const std::vector<PlannedNode>& plan,
                      const std::function<TensorDesc(const Ref&)>& external, const Device& device,
                      const TemplateRenderer& render);

}  // namespace bonfire::kernels
