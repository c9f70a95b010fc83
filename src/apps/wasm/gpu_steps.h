// The browser worker's WebGPU steps: calls the worker core hands over
// (net::DeviceCall) become step programs (kernels/gpu_step.h) that
// web/webgpu.js runs on the tab's GPU device, asking back here for the
// bytes of inputs and weights and for the nodes left to the CPU.
//
//   C++ → JS  Module.bfGpuStep(job, program JSON)   run it; answer with bf_gpu_finish
//             Module.bfGpuRelease(handle)            a device-held tensor is gone
//   JS → C++  bf_gpu_value(job, id) → [ptr, bytes]   a value's bytes on the CPU (0 if none)
//             bf_gpu_put(job, id, ptr, bytes)        a value read back from the GPU (C++ frees)
//             bf_gpu_run_cpu(job, item) → error      one CPU item, its inputs all put here
//             bf_gpu_finish(job, retained, error)    the answer: retained {name: handle}, or the error
//             bf_gpu_lost(why)                       the device is gone: its sessions are dropped
//
// Session tensors a step leaves on the GPU are kept in the session as
// device-held tensors (graph/session.h) whose owner releases the buffer's
// handle; the CPU engine refuses to read them, so a session that starts on
// the GPU stays there (batched calls are not announced with WebGPU steps).
#pragma once
#include <functional>

#include "kernels/device.h"
#include "net/worker_core.h"

namespace bonfire::wasm {

// The hook for WorkerCore::Hooks::device_call: takes a call made on the
// runtime's own thread (generation steps; clients' graphs run on lanes and
// stay on the CPU) when at least one node runs on `device` or the session's
// tensors are held there.
std::function<bool(net::DeviceCall&)> gpu_step_hook(kernels::Device device);

// Where bf_gpu_lost drops the sessions.
void set_gpu_core(net::WorkerCore* core);

}  // namespace bonfire::wasm
