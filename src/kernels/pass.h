// The interface between the kernel package runtime (runtime.h) and the C++
// functions that implement a package's passes. A pass function is found by
// the pass's "name" in the package ("QMoE.RouteStage"); the runtime calls it
// once per dispatch of that pass, in the package's order (repeat blocks
// unrolled), with the buffers of the op and the chosen variant's
// intermediates. The function splits `dispatch` over the worker's threads
// itself (core/threads.h parallel_for); it never starts threads of its own.
//
// Promises: find_pass calls register_qmoe_passes() once before its first
// lookup, so passes defined in src/kernels/qmoe/ are found without any
// static-initialisation order games; register_pass replaces nothing
// silently (a second, different function for a name is an error).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bonfire::kernels {

// A tensor of any dtype the packages use ("float32", "uint8", "uint32"), row-major, little-endian.
struct Buffer {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;   // numel * element size
  // A tensor may instead view bytes someone else owns (a graph's weight or
  // output, src/kernels/graph_ops.cpp): then `bytes` is empty. Passes read
  // an input view through as<T>() and never write it; an output view is
  // written in place (CallPlan::run).
  const uint8_t* view = nullptr;
  size_t view_size = 0;

  int64_t numel() const;
  size_t size_bytes() const { return view ? view_size : bytes.size(); }
  template <class T> T* as() { return reinterpret_cast<T*>(view ? const_cast<uint8_t*>(view) : bytes.data()); }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(view ? view : bytes.data()); }
};

struct PassArgs {
  const nlohmann::json& attrs;                                  // the op's attributes, defaults applied
  std::function<double(const std::string& name)> num;           // a derive/constant value by name ("numTokens", "topK", "hiddenChunkTokens", "constants.X" also accepted), evaluated lazily
  std::map<std::string, Buffer>& buffers;                       // inputs and outputs by role ("input", "router_probs", "fc1_experts_weights", ..., "output"), intermediates by id ("routeExpert", "hiddenAct", ...)
  int64_t repeat_index = -1;                                    // inside a repeat block: its index (e.g. repeat.chunk), else -1
  std::array<int64_t, 3> dispatch = {1, 1, 1};                  // the pass's dispatch: {threads,1,1} or {x,y,z}
  std::string variant;                                          // the chosen variant's id
};

using PassFn = void (*)(PassArgs& args);
void register_pass(const std::string& name, PassFn fn);   // name: the pass's "name" in the package
PassFn find_pass(const std::string& name);                // null if none

// Called once before lookups; the QMoE passes register themselves from
// src/kernels/qmoe/. Until that exists, src/kernels/qmoe_register_default.cpp
// holds an empty (weak) definition.
void register_qmoe_passes();

}  // namespace bonfire::kernels
