#include "kernels/gpu_plan.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/runtime.h"

namespace bonfire::kernels {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// WGSL's name for a binding set's element type, as the package spells it.
std::string wgsl_access(const std::string& type) { return type == "read-only-storage" ? "read" : "read_write"; }

// Whole numbers as integers: the template engine prints 64, not 64.0.
ojson template_value(const json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return (int64_t)d;
  }
  return ojson(v);
}

int32_t as_i32(double v) { return (int32_t)v; }

struct Planner {
  const Package& package;
  const Variant& variant;
  const Device& device;
  Scope& scope;
  const TemplateRenderer& render;
  GpuPlan plan = {};
  std::map<std::string, std::string> shader_keys = {};  // template + variables -> key
  std::map<std::string, int> renders_of = {};           // template -> renders so far
  std::set<std::string> buffer_ids = {};

  [[noreturn]] void unsupported(const Pass& s, const std::string& why) const {
    throw Error(ErrorCode::UnsupportedFeature,
                "variant " + variant.id + ", pass " + s.id + " (" + s.name + (s.shader.empty() ? "" : ", " + s.shader) +
                    "): " + why,
                "", s.name);
  }

  // The constants every template of this variant sees (evaluated once; a
  // constant that cannot be evaluated here is left out, and a template that
  // reads it fails naming it).
  ojson constants = ojson::object(), constant_bits = ojson::object();
  void evaluate_constants() {
    std::set<std::string> names;
    for (const auto& [k, e] : package.constants) names.insert(k);
    for (const auto& [k, e] : variant.constants) names.insert(k);
    for (const std::string& k : names) {
      json v;
      try {
        v = scope.value("constants." + k);
      } catch (const Error&) {
        continue;
      }
      constants[k] = template_value(v);
      if (v.is_number()) constant_bits[k] = f32_bits(v.get<double>());
      if (v.is_boolean()) constant_bits[k] = v.get<bool>() ? 1u : 0u;
    }
  }

  std::string shader_for(const Pass& s, const std::vector<BindingSlot>& slots, const json& workgroup_size) {
    ojson vars = ojson::object();
    vars["constants"] = constants;
    vars["constantBits"] = constant_bits;
    vars["tunables"] = ojson::object();
    for (const auto& [k, v] : package.tunables.items()) vars["tunables"][k] = template_value(v);
    vars["workgroupSize"] = template_value(workgroup_size);
    vars["bindings"] = wgsl_declarations(slots);
    vars["pass"] = {{"id", s.id}, {"name", s.name}, {"variant", variant.id}};
    vars["features"] = ojson(device.view.value("features", json::array()));
    const std::string id = s.shader + "\n" + vars.dump();
    auto it = shader_keys.find(id);
    if (it != shader_keys.end()) return it->second;
    std::string wgsl;
    try {
      wgsl = render(s.shader, vars);
    } catch (const std::exception& e) {
      unsupported(s, std::string("the template did not render: ") + e.what());
    }
    const std::string key = s.shader + "#" + std::to_string(renders_of[s.shader]++);
    plan.shaders[key] = std::move(wgsl);
    shader_keys[id] = key;
    return key;
  }

  GpuBinding uniform(const BindingSlot& b, int index, const Pass& s) {
    GpuBinding g{index, b.name, "uniform", "", {}};
    for (const auto& f : b.fields) {
      const std::string what = "bindingSets." + s.bindings + "." + b.name + "." + f.name;
      const double v = scope.number(f.value);
      if (f.type == "f32") g.words.push_back(f32_bits(v));
      else if (f.type == "u32") g.words.push_back((uint32_t)whole_number(v, what + " \"" + f.value.source() + "\""));
      else {
        const int32_t i = as_i32(v);
        uint32_t u;
        std::memcpy(&u, &i, 4);
        g.words.push_back(u);
      }
    }
    while (g.words.size() % 4 || g.words.empty()) g.words.push_back(0);
    return g;
  }

  void add_dispatch(const Pass& s, int64_t repeat_index) {
    if (s.shader.empty()) unsupported(s, "the pass names no shader");
    if (s.bindings.empty()) unsupported(s, "the pass names no bindings set");
    const std::vector<BindingSlot>& slots = package.binding_sets.at(s.bindings);
    GpuDispatch d;
    d.pass = s.id;
    d.name = s.name;
    d.path = s.path;
    const std::array<int64_t, 3> size = dispatch_size(scope, s);
    json workgroup_size = nullptr;
    uint32_t threads = 0;
    if (s.threads) {
      if (!s.workgroup_size) unsupported(s, "a {threads} dispatch needs a workgroupSize on a GPU");
      const int64_t w = whole_number(scope.number(*s.workgroup_size), s.path + ".dispatch.workgroupSize");
      if (w < 1) unsupported(s, "workgroupSize is 0");
      workgroup_size = w;
      threads = (uint32_t)size[0];
      d.workgroups = thread_workgroups(size[0], w, device);
    } else {
      d.workgroups = size;
      if (s.workgroup_size) workgroup_size = scope.number(*s.workgroup_size);
    }
    for (int axis = 0; axis < 3; ++axis)
      if (d.workgroups[axis] > (int64_t)device.limit("maxComputeWorkgroupsPerDimension").value_or(65535))
        unsupported(s, "dispatch of " + std::to_string(d.workgroups[axis]) + " workgroups is over the device's " +
                           "maxComputeWorkgroupsPerDimension");
    d.shader = shader_for(s, slots, workgroup_size);
    for (size_t i = 0; i < slots.size(); ++i) {
      const BindingSlot& b = slots[i];
      if (b.type == "uniform") {
        d.bindings.push_back(uniform(b, (int)i, s));
        continue;
      }
      if (!buffer_ids.count(b.semantic))
        unsupported(s, "binding " + b.name + " names \"" + b.semantic + "\", which is no tensor or intermediate");
      d.bindings.push_back({(int)i, b.name, b.type, b.semantic, {}});
    }
    GpuBinding info{(int)slots.size(), "dispatchInfo", "uniform", "", {}};
    info.words = {threads, (uint32_t)d.workgroups[0], (uint32_t)std::max<int64_t>(0, repeat_index), 0};
    d.bindings.push_back(std::move(info));
    plan.dispatches.push_back(std::move(d));
  }

};

int64_t bytes_of(const std::string& dtype, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n * (int64_t)dtype_size(dtype);
}

}  // namespace

// memcpy: std::bit_cast is missing from emscripten's libc++.
uint32_t f32_bits(double x) {
  const float f = (float)x;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::array<int64_t, 3> thread_workgroups(int64_t threads, int64_t workgroup_size, const Device& device) {
  const int64_t groups = (threads + workgroup_size - 1) / workgroup_size;
  const int64_t per_dim = (int64_t)device.limit("maxComputeWorkgroupsPerDimension").value_or(65535);
  const int64_t x = std::min(groups, per_dim);
  return {x, x == 0 ? 1 : (groups + x - 1) / x, 1};
}

std::string wgsl_declarations(const std::vector<BindingSlot>& slots) {
  std::string out;
  for (size_t i = 0; i < slots.size(); ++i) {
    const BindingSlot& b = slots[i];
    const std::string at = "@group(0) @binding(" + std::to_string(i) + ") ";
    if (b.type == "uniform") {
      out += "struct " + b.struct_name + " {\n";
      for (const auto& f : b.fields) out += "  " + f.name + ": " + f.type + ",\n";
      out += "};\n" + at + "var<uniform> " + b.name + ": " + b.struct_name + ";\n";
    } else {
      out += at + "var<storage, " + wgsl_access(b.type) + "> " + b.name + ": array<" + b.element_type + ">;\n";
    }
  }
  out +=
      "struct DispatchInfo {\n  threads: u32,\n  groupsX: u32,\n  repeatIndex: u32,\n  pad: u32,\n};\n"
      "@group(0) @binding(" +
      std::to_string(slots.size()) + ") var<uniform> dispatchInfo: DispatchInfo;\n";
  return out;
}

json GpuPlan::to_json() const {
  json j = {{"variant", variant}, {"shaders", shaders}};
  j["buffers"] = json::array();
  for (const auto& b : buffers) {
    j["buffers"].push_back({{"id", b.id}, {"kind", b.kind}, {"dtype", b.dtype}, {"shape", b.shape}, {"bytes", b.bytes}});
    if (b.kind == "constant") j["buffers"].back()["words"] = b.words;
  }
  j["dispatches"] = json::array();
  for (const auto& d : dispatches) {
    json bindings = json::array();
    for (const auto& b : d.bindings) {
      json e = {{"binding", b.binding}, {"name", b.name}, {"type", b.type}};
      if (b.type == "uniform") e["words"] = b.words;
      else e["buffer"] = b.buffer;
      bindings.push_back(std::move(e));
    }
    j["dispatches"].push_back({{"pass", d.pass},
                               {"name", d.name},
                               {"path", d.path},
                               {"shader", d.shader},
                               {"workgroups", d.workgroups},
                               {"bindings", std::move(bindings)}});
  }
  return j;
}

GpuPlan plan_gpu(const Package& package, const Bound& bound, const Device& device, int index,
                 const TemplateRenderer& render) {
  if (index < 0 || index >= (int)package.variants.size()) throw Error(ErrorCode::Internal, "no such variant");
  const Variant& v = package.variants[index];
  Scope scope(package, bound, device);
  scope.set_variant(&v);
  Planner p{package, v, device, scope, render};
  p.plan.variant = v.id;
  for (const auto& t : package.inputs)
    p.plan.buffers.push_back({t.role, "input", bound.dtypes.at(t.role), bound.shapes.at(t.role),
                              bytes_of(bound.dtypes.at(t.role), bound.shapes.at(t.role))});
  for (const auto& t : package.outputs)
    p.plan.buffers.push_back({t.role, "output", bound.dtypes.at(t.role), bound.shapes.at(t.role),
                              bytes_of(bound.dtypes.at(t.role), bound.shapes.at(t.role))});
  for (const Intermediate& im : v.intermediates) {
    std::vector<int64_t> shape = intermediate_shape(scope, im);
    const int64_t bytes = bytes_of(im.dtype, shape);
    p.plan.buffers.push_back({im.id, "intermediate", im.dtype, std::move(shape), bytes});
  }
  for (const auto& b : p.plan.buffers) {
    p.buffer_ids.insert(b.id);
    const auto limit = device.limit("maxStorageBufferBindingSize");
    if (limit && b.bytes > *limit)
      throw Error(ErrorCode::UnsupportedFeature, "variant " + v.id + ": " + b.kind + " " + b.id + " is " +
                                                     std::to_string(b.bytes) +
                                                     " bytes, over the device's maxStorageBufferBindingSize (" +
                                                     std::to_string((int64_t)*limit) + ")");
  }
  p.evaluate_constants();
  for_each_pass_call(scope, v.passes, [&](const Pass& s, int64_t repeat_index) { p.add_dispatch(s, repeat_index); });
  return std::move(p.plan);
}

}  // namespace bonfire::kernels
