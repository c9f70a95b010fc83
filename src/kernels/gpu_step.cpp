#include "kernels/gpu_step.h"

#include <memory>
#include <mutex>

#include "core/error.h"
#include "kernels/gpu_ops.h"

namespace bonfire::kernels {

using json = nlohmann::json;

namespace {

// gpu_ops.h's dtype names; "" for what no GPU kernel reads.
std::string gpu_dtype(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    default: return dtype_name(t);
  }
}

const char* source_of(const Ref& r) {
  static const char* kFrom[] = {"input", "weight", "state", "node"};  // Ref::Kind's order
  return kFrom[r.kind];
}

GpuStepValue value_of(const std::string& from, const TensorDesc& d) {
  return {from, gpu_dtype(d.dtype), d.shape, d.nbytes()};
}

// Moves `plan`'s shaders into the step's (one key per text; `keys` maps
// the step's texts to their keys) and names its constants after the node,
// so items share one buffer namespace.
void adopt(GpuStep& step, GpuStepItem& item, std::map<std::string, std::string>& keys) {
  std::map<std::string, std::string> rename;
  for (auto& b : item.plan.buffers) {
    if (b.kind != "constant") continue;
    const std::string id = item.out + "#" + b.id;
    rename[b.id] = id;
    b.id = id;
  }
  std::map<std::string, std::string> shader_key;
  for (auto& [key, text] : item.plan.shaders) {
    auto [it, added] = keys.emplace(text, "s" + std::to_string(step.shaders.size()));
    if (added) step.shaders[it->second] = text;
    shader_key[key] = it->second;
  }
  item.plan.shaders.clear();
  for (auto& d : item.plan.dispatches) {
    d.shader = shader_key.at(d.shader);
    for (auto& b : d.bindings)
      if (auto it = rename.find(b.buffer); it != rename.end()) b.buffer = it->second;
  }
}

}  // namespace

std::string gpu_value_id(const Graph& g, const Ref& r) {
  switch (r.kind) {
    case Ref::Node: return "n:" + g.nodes.at(r.node).id;
    case Ref::Input: return "in:" + r.name;
    case Ref::Weight: return "w:" + r.name;
    case Ref::Session: return "s:" + r.name;
  }
  return "";
}

TemplateRenderer memoized_renderer(TemplateRenderer render) {
  struct Memo {
    std::mutex mu;
    std::map<std::string, std::string> texts;
  };
  auto memo = std::make_shared<Memo>();
  return [memo, render = std::move(render)](const std::string& name, const nlohmann::ordered_json& vars) {
    const std::string key = name + "\n" + vars.dump();
    {
      std::lock_guard<std::mutex> lock(memo->mu);
      if (auto it = memo->texts.find(key); it != memo->texts.end()) return it->second;
    }
    std::string text = render(name, vars);
    std::lock_guard<std::mutex> lock(memo->mu);
    if (memo->texts.size() > 4096) memo->texts.clear();  // a bound, not a policy: a step renders a handful
    memo->texts[key] = text;
    return text;
  };
}

int GpuStep::gpu_nodes() const {
  int n = 0;
  for (const auto& item : items) n += item.gpu;
  return n;
}

GpuStep plan_gpu_step(const Graph& g, const std::vector<PlannedNode>& plan,
                      const std::function<TensorDesc(const Ref&)>& external, const Device& device,
                      const TemplateRenderer& render) {
  GpuStep step;
  // A mutating op on a session tensor writes the session in place (no
  // retain needed): the value it outputs, which on the GPU is a new buffer,
  // becomes the session's tensor. aliases: value id -> session tensor name.
  std::map<std::string, std::string> aliases;
  std::map<std::string, std::string> shader_keys;  // WGSL text -> its key in step.shaders
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& node = g.nodes[i];
    // A CPU node that writes an input in place would change a value the GPU
    // may hold a copy of; such graphs (recurrent states) stay on the CPU.
    for (size_t k = 0; k < node.in.size(); ++k)
      if ((int)k != node.op->mutates_input && node.op->writes((int)k, plan[i].params, node.in.size()))
        throw Error(ErrorCode::UnsupportedFeature,
                    "node " + node.id + " (" + node.op->name + ") writes its input " + std::to_string(k) +
                        " in place, which a GPU step does not follow",
                    node.id);
    GpuStepItem item;
    item.node = i;
    item.id = node.id;
    item.out = "n:" + node.id;
    std::vector<GpuValue> inputs;
    for (const auto& r : node.in) {
      const std::string id = gpu_value_id(g, r);
      item.in.push_back(id);
      if (!step.values.count(id)) step.values[id] = value_of(source_of(r), external(r));
      const GpuStepValue& v = step.values[id];
      inputs.push_back({id, v.dtype, v.shape});
    }
    step.values[item.out] = value_of("node", plan[i].out);
    if (node.op->mutates_input >= 0) {
      const Ref& r = node.in.at(node.op->mutates_input);
      const std::string id = gpu_value_id(g, r);
      const std::string name = r.kind == Ref::Session ? r.name : aliases.count(id) ? aliases[id] : "";
      if (!name.empty()) {
        aliases[item.out] = name;
        step.retain[name] = item.out;
      }
    }
    if (plan[i].out.dtype != DType::F32) {
      item.why_cpu = "its output is " + std::string(dtype_name(plan[i].out.dtype));
    } else {
      try {
        item.plan = plan_gpu_node(node.op->name, plan[i].params.all(), inputs, item.out, device, render);
        item.gpu = true;
        adopt(step, item, shader_keys);
      } catch (const Error& e) {
        if (e.code != ErrorCode::UnsupportedFeature) throw;
        item.why_cpu = e.what();
      }
    }
    step.items.push_back(std::move(item));
  }
  for (const auto& o : g.outputs) {
    const std::string id = gpu_value_id(g, o);
    if (!step.values.count(id)) step.values[id] = value_of(source_of(o), external(o));
    step.outputs.push_back({o.text(), id});
  }
  for (const auto& [name, r] : g.retain) {  // after the writes in place, as run_graph keeps them
    const std::string id = gpu_value_id(g, r);
    if (!step.values.count(id)) step.values[id] = value_of(source_of(r), external(r));
    step.retain[name] = id;
  }
  return step;
}

json GpuStep::to_json() const {
  json j;
  j["values"] = json::object();
  for (const auto& [id, v] : values)
    j["values"][id] = {{"from", v.from}, {"dtype", v.dtype}, {"shape", v.shape}, {"bytes", v.bytes}};
  j["shaders"] = shaders;
  j["items"] = json::array();
  for (const auto& item : items) {
    json it = {{"node", item.node}, {"id", item.id}, {"gpu", item.gpu}, {"in", item.in}, {"out", item.out}};
    if (item.gpu) {
      const json p = item.plan.to_json();
      it["buffers"] = p["buffers"];
      it["dispatches"] = p["dispatches"];
    } else {
      it["whyCpu"] = item.why_cpu;
    }
    j["items"].push_back(std::move(it));
  }
  j["outputs"] = json::array();
  for (const auto& [name, id] : outputs) j["outputs"].push_back({{"name", name}, {"value", id}});
  j["retain"] = retain;
  return j;
}

}  // namespace bonfire::kernels
