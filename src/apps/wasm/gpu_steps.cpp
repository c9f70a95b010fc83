#include "apps/wasm/gpu_steps.h"

#include <emscripten.h>
#include <emscripten/threading.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "apps/wasm/js_owned.h"
#include "core/error.h"
#include "kernels/gpu_ops.h"
#include "kernels/gpu_step.h"
#include "model/wgsl_renderer.h"

using namespace bonfire;
using json = nlohmann::json;
using bonfire::wasm::js_owned;

namespace {

struct Job {
  net::DeviceCall call;
  std::vector<PlannedNode> plan;
  kernels::GpuStep step;
  std::map<std::string, Tensor> host;  // values on the CPU: put by JS or computed by CPU items
};

// Everything here runs on the lend worker's own thread (steps are inline,
// and JS calls back on it); only release() may come from another thread.
std::map<int, std::unique_ptr<Job>> g_jobs;
int g_next_job = 1;
net::WorkerCore* g_core = nullptr;
bool g_enabled = true;  // off between a lost device and a fresh one
int32_t g_value_answer[2];

// A device-held tensor's owner: the buffer's handle, released in JS when
// the session lets go of it (freed, expired, replaced by the next step).
std::shared_ptr<void> handle_owner(int handle) {
  return std::shared_ptr<void>(new int(handle), [](void* p) {
    const int h = *static_cast<int*>(p);
    delete static_cast<int*>(p);
    MAIN_THREAD_ASYNC_EM_ASM({ if (Module.bfGpuRelease) Module.bfGpuRelease($0); }, h);
  });
}
int handle_of(const Tensor& t) { return *static_cast<const int*>(t.owner.get()); }

Job* job(int id) {
  auto it = g_jobs.find(id);
  return it == g_jobs.end() ? nullptr : it->second.get();
}

// A value as the CPU holds it, or null (a node value not put here yet, a
// session tensor held on the device).
Tensor* host_value(Job& j, const std::string& id) {
  if (auto it = j.host.find(id); it != j.host.end()) return &it->second;
  const std::string name = id.substr(id.find(':') + 1);
  if (id.rfind("in:", 0) == 0) {
    auto it = j.call.inputs.find(name);
    return it == j.call.inputs.end() ? nullptr : &it->second;
  }
  if (id.rfind("w:", 0) == 0) return const_cast<Tensor*>(j.call.weights(name));
  if (id.rfind("s:", 0) == 0 && j.call.session) {
    auto it = j.call.session->tensors.find(name);
    if (it != j.call.session->tensors.end() && !on_device(it->second)) return &it->second;
  }
  return nullptr;
}

json program(Job& j, int id) {
  json p = j.step.to_json();
  p["job"] = id;
  for (auto& [vid, v] : p["values"].items()) {
    const std::string name = vid.substr(vid.find(':') + 1);
    if (vid.rfind("s:", 0) == 0 && j.call.session) {
      const Tensor& t = j.call.session->tensors.at(name);
      if (on_device(t)) v["handle"] = handle_of(t);
    }
    // A model's weights are uploaded once per tab; inline ones each call.
    if (vid.rfind("w:", 0) == 0 && !j.call.model.empty() && j.call.inline_weights->count(name) == 0)
      v["key"] = j.call.model + "/" + name;
  }
  if (!j.call.session) p["retain"] = json::object();
  return p;
}

bool any_on_device(const net::DeviceCall& c) {
  if (!c.session) return false;
  for (const auto& [k, t] : c.session->tensors)
    if (on_device(t)) return true;
  return false;
}

}  // namespace

namespace bonfire::wasm {

void set_gpu_core(net::WorkerCore* core) { g_core = core; }

std::function<bool(net::DeviceCall&)> gpu_step_hook(kernels::Device device) {
  auto render = kernels::memoized_renderer(render_wgsl);
  return [device = std::move(device), render](net::DeviceCall& c) {
    // Generation steps run on the runtime's own thread (inline_steps), where
    // the page's WebGPU device lives; a client's graph on a lane (a pthread,
    // another JS context without the device) runs on the CPU.
    if (!g_enabled || !emscripten_is_main_runtime_thread()) return false;
    auto j = std::make_unique<Job>();
    const Graph& g = c.call->graph;
    try {
      j->plan = plan_graph(g, c.inputs, c.bind, c.weights, c.session.get(), c.limits);
      j->step = kernels::plan_gpu_step(
          g, j->plan,
          [&](const Ref& r) -> TensorDesc {
            if (r.kind == Ref::Input) return c.inputs.at(r.name).desc();
            if (r.kind == Ref::Weight) return c.weights(r.name)->desc();
            return c.session->tensors.at(r.name).desc();
          },
          device, render);
    } catch (const Error&) {
      // The CPU engine takes it (and names what is wrong, or that the
      // session's tensors are on the GPU).
      return false;
    }
    if (j->step.gpu_nodes() == 0 && !any_on_device(c)) return false;
    j->call = std::move(c);
    const int id = g_next_job++;
    const std::string text = program(*j, id).dump();
    g_jobs[id] = std::move(j);
    const int refused = EM_ASM_INT({
      try {
        Module.bfGpuStep($0, UTF8ToString($1));
        return 0;
      } catch (e) {
        Module.bfLog('WebGPU: the step was not taken: ' + (e && e.stack || e));
        return 1;
      }
    }, id, text.c_str());
    if (refused) {
      auto node = g_jobs.extract(id);
      node.mapped()->call.fail(Error(ErrorCode::Internal, "the page did not take the WebGPU step (see its log)"));
    }
    return true;
  };
}

}  // namespace bonfire::wasm

extern "C" {

// [pointer, bytes] of a value's data on the CPU, or [0, 0].
EMSCRIPTEN_KEEPALIVE int32_t* bf_gpu_value(int id, const char* value) {
  g_value_answer[0] = g_value_answer[1] = 0;
  Job* j = job(id);
  if (!j) return g_value_answer;
  if (const Tensor* t = host_value(*j, value); t && t->data) {
    g_value_answer[0] = (int32_t)reinterpret_cast<intptr_t>(t->data);
    g_value_answer[1] = (int32_t)t->nbytes();
  }
  return g_value_answer;
}

// Takes `data` (malloc'ed by JS): the f32 value `value` read back from the GPU.
EMSCRIPTEN_KEEPALIVE int bf_gpu_put(int id, const char* value, void* data, int bytes) {
  std::shared_ptr<void> owner(data, std::free);
  Job* j = job(id);
  if (!j) return 1;
  auto it = j->step.values.find(value);
  if (it == j->step.values.end() || it->second.dtype != "float32" || it->second.bytes != bytes) return 1;
  j->host[value] = Tensor::view(DType::F32, it->second.shape, data, owner);
  return 0;
}

// Runs CPU item `item`; null, or the error (JS frees it).
EMSCRIPTEN_KEEPALIVE char* bf_gpu_run_cpu(int id, int item) {
  Job* j = job(id);
  if (!j || item < 0 || item >= (int)j->step.items.size()) return js_owned("no such step item");
  const kernels::GpuStepItem& it = j->step.items[item];
  try {
    OpInputs in;
    for (const auto& v : it.in) {
      Tensor* t = host_value(*j, v);
      if (!t) throw Error(ErrorCode::Internal, "node " + it.id + ": its input " + v + " is not on the CPU");
      in.push_back(t);
    }
    Tensor out;
    run_planned_node(j->call.call->graph, it.node, j->plan[it.node], in, out);
    j->host[it.out] = std::move(out);
    return nullptr;
  } catch (const std::exception& e) {
    return js_owned(std::string("node ") + it.id + ": " + e.what());
  }
}

// The step is over. `retained` ({session tensor: handle}) names the values
// the GPU keeps for the session; the rest of the answer is on the CPU.
EMSCRIPTEN_KEEPALIVE void bf_gpu_finish(int id, const char* retained, const char* error) {
  auto node = g_jobs.extract(id);
  if (node.empty()) return;
  Job& j = *node.mapped();
  try {
    if (error && *error) throw Error(ErrorCode::Internal, std::string("WebGPU step: ") + error);
    const json handles = json::parse(retained ? retained : "{}");
    RunResult r;
    for (const auto& [name, vid] : j.step.outputs) {
      const Tensor* t = host_value(j, vid);
      if (!t) throw Error(ErrorCode::Internal, "WebGPU step: the output " + name + " was not read back");
      r.outputs[name] = *t;
    }
    if (j.call.session) {
      std::map<std::string, Tensor> kept;
      for (const auto& [name, vid] : j.step.retain) {
        if (handles.contains(name)) {
          Tensor t;
          t.shape = j.step.values.at(vid).shape;
          t.owner = handle_owner(handles[name].get<int>());
          kept[name] = std::move(t);
        } else if (vid.rfind("s:", 0) == 0) {
          kept[name] = j.call.session->tensors.at(vid.substr(2));  // kept as it is, on either side
        } else if (const Tensor* t = host_value(j, vid)) {
          kept[name] = *t;
        } else {
          throw Error(ErrorCode::Internal, "WebGPU step: the retained " + name + " is neither kept nor read back");
        }
      }
      for (auto& [name, t] : kept) j.call.session->tensors[name] = std::move(t);
    }
    j.call.done(std::move(r));
  } catch (const Error& e) {
    j.call.fail(e);
  } catch (const std::exception& e) {
    j.call.fail(Error(ErrorCode::Internal, e.what()));
  }
}

// The GPU device is lost: the sessions whose tensors it held cannot go on,
// and steps run on the CPU until bf_gpu_enable(1) (a fresh device).
EMSCRIPTEN_KEEPALIVE void bf_gpu_lost() {
  g_enabled = false;
  if (!g_core) return;
  g_core->drop_sessions();
  g_core->set_gpu_ops({});  // the next hello says the steps run in WebAssembly
}

EMSCRIPTEN_KEEPALIVE void bf_gpu_enable(int on) {
  g_enabled = on != 0;
  if (g_core) g_core->set_gpu_ops(g_enabled ? kernels::gpu_op_names() : std::vector<std::string>{});
}

}  // extern "C"
