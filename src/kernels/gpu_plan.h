// A package's variant as a WebGPU device runs it: the buffers, the WGSL of
// every pass (its `.wgsl.jinja` template rendered with the call's constants),
// and the dispatches in order (repeat blocks unrolled), each with its bind
// group and the bytes of its uniform parameters. The plan is data: the
// browser worker's WebGPU runner (web/webgpu/plan_runner.js) executes it
// without knowing the package, and `bonfire kernel plan` prints it.
//
// Promises:
// - every value the runtime (runtime.h) would compute for the same call is
//   computed the same way here (one Scope, the same whole-number checks):
//   intermediates' shapes, dispatch sizes, repeat counts, binding values;
// - a dispatch given as `{threads, workgroupSize}` becomes
//   ceilDiv(threads, workgroupSize) workgroups, folded into y when over the
//   device's maxComputeWorkgroupsPerDimension; the shader reads the thread
//   count and the fold from its `dispatchInfo` uniform (see below);
// - a pass without a shader or a bindings set, a semantic that names no
//   tensor or intermediate, or a template that fails to render is
//   Error(UnsupportedFeature) naming the pass and the shader, so the caller
//   can run the CPU path instead.
//
// What a template sees (the variables of its render):
//   constants      every package and variant constant, evaluated
//   constantBits   the same numbers as the u32 bit patterns of their f32
//                  values (exact floats: bitcast<f32> of a private variable
//                  holding them; WGSL refuses a NaN or infinite constant)
//   tunables       the package's tunables
//   workgroupSize  the pass's evaluated workgroupSize (null when absent)
//   bindings       the WGSL declarations of the pass's binding set, then
//                  `dispatchInfo` (a uniform {threads, groupsX, repeat, pad}
//                  at the next binding), ready to paste
//   pass           {id, name, variant}
//   features       the device's features
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/package.h"
#include "kernels/scope.h"

namespace bonfire::kernels {

struct GpuBuffer {
  std::string id;     // a tensor's role or an intermediate's id
  std::string kind;   // "input", "output", "intermediate" or "constant"
  std::string dtype;  // "float32", "uint8", "uint32"
  std::vector<int64_t> shape;
  int64_t bytes = 0;  // numel * element size (the GPU buffer is this rounded up to 4, at least 4)
  std::vector<uint32_t> words = {};  // a constant's contents (tables the planner computed)
};

struct GpuBinding {
  int binding = 0;
  std::string name;         // the WGSL variable
  std::string type;         // "storage", "read-only-storage" or "uniform"
  std::string buffer;       // a GpuBuffer id; empty for a uniform
  std::vector<uint32_t> words;  // a uniform's bytes as 32-bit words (padded to 16 bytes)
};

struct GpuDispatch {
  std::string pass, name, path;  // the pass's id, its function name, its JSON path
  std::string shader;            // a key of GpuPlan::shaders
  std::array<int64_t, 3> workgroups = {1, 1, 1};
  std::vector<GpuBinding> bindings;
};

struct GpuPlan {
  std::string variant;
  std::vector<GpuBuffer> buffers;
  std::map<std::string, std::string> shaders;  // key ("qmoe-route-stage.wgsl.jinja#0") -> WGSL
  std::vector<GpuDispatch> dispatches;
  nlohmann::json to_json() const;
};

// Renders a template by its file name with the variables above; throws on
// failure. The planner cannot render itself: the template engine lives in
// a later layer (model/chat_template), so the caller passes it in.
using TemplateRenderer = std::function<std::string(const std::string& name, const nlohmann::ordered_json& vars)>;

// The WGSL declarations of a binding set (binding i is slots[i]), then
// `dispatchInfo` at binding slots.size(): the `bindings` variable above.
std::string wgsl_declarations(const std::vector<BindingSlot>& slots);

// The bits of x as an f32 (what a uniform word or a constant holds).
uint32_t f32_bits(double x);

// ceilDiv(threads, workgroup_size) workgroups as {x, y, 1}, folded into y
// when over the device's maxComputeWorkgroupsPerDimension.
std::array<int64_t, 3> thread_workgroups(int64_t threads, int64_t workgroup_size, const Device& device);

GpuPlan plan_gpu(const Package& package, const Bound& bound, const Device& device, int variant,
                 const TemplateRenderer& render);

}  // namespace bonfire::kernels
