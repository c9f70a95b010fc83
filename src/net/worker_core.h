// What a worker does with the coordinator's messages, whatever carries them.
// `bonfire worker` (net/worker.h) carries them over its own WebSocket; the
// browser worker (src/apps/wasm) gets them from the page's WebSocket. Both
// announce the same hello, run the same graphs and keep sessions the same
// way, so a tab is an ordinary worker to the coordinator.
//
// Promises:
// - on_message() never blocks on work (but see inline_steps): pings are
//   answered at once, the rest is queued on a lane, each lane run in order on its own thread:
//   generation steps, clients' own graphs ("lane": "graph") and model loads,
//   so a long client graph or a download never holds a generation up.
// - The worker's own limits apply whatever the coordinator asks: `memory`
//   bounds a received frame, the queue and the sessions together with what a
//   call may allocate; every call has a time budget; a model larger than
//   `model_bytes_max` is refused before a byte of it is fetched.
// - A refused call leaves no trace, not even an empty new session.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "graph/session.h"
#include "net/frame.h"
#include "net/model_hash.h"

namespace bonfire::net {

struct WorkerCoreOptions {
  std::string token;                 // the network's shared secret
  std::string id;                    // "" lets the coordinator name it
  std::string kind = "native";       // "browser" for a lent tab (hello "kind")
  // A WebGPU device the worker holds, in the device-file form
  // (docs/KERNELS.md): announced as hello "device.webgpu", and shown by the
  // coordinator and the web page.
  nlohmann::json webgpu = nullptr;
  // The graph ops its steps run on that device (Hooks::device_call), the
  // rest on the CPU: announced as hello "device.gpuOps", with type "webgpu".
  std::vector<std::string> gpu_ops;
  std::string coordinator;           // its address, for the log
  int64_t memory = int64_t(4) << 30; // bytes this worker lends
  int64_t model_bytes_max = 0;       // largest model it accepts (0: 4 × memory, the files are mapped)
  int64_t widen_half_max = 0;        // f16/bf16 weights of models up to this size go to f32 (LocalModel::Options)
  std::set<std::string> disabled_features;  // run as a worker without these
  std::string local_secret;          // proves this is the coordinator's own worker (serve sets it)
  double call_max_s = 600;           // no call runs longer, whatever the coordinator asks
  double session_ttl_s = 1800;       // idle sessions are freed after this
  bool fetch_models = true;          // accept models from the coordinator
  // Generation steps run on the thread that calls on_message instead of a
  // lane: the browser worker, whose every hop between threads is a message
  // through the browser's event loop (pings wait while a step runs), and
  // serve's own worker on its in-process link (local_link.h), where that
  // thread is the coordinator's, waiting for the step anyway.
  bool inline_steps = false;
  bool quiet = false;
  // The read bandwidth this machine measured, GB/s (0: not measured):
  // announced as hello "device.readGBs", placement's guess at its speed
  // until its steps are timed (net/placement.h).
  double read_gbs = 0;
  std::string fault;        // test aids: "lie=P", "slow=MS" (net/worker_fault.h)
  uint64_t fault_seed = 0;  // the fault's coin; 0 draws one
};


// A call handed to a device runner instead of run here (the browser
// worker's WebGPU steps, kernels/gpu_step.h): what run_graph would get, and
// how to answer. The runner calls exactly one of done and fail, on any
// thread; until then the call's weights, inputs and session stay alive.
struct DeviceCall {
  std::shared_ptr<const Call> call;
  std::map<std::string, Tensor> inputs;
  nlohmann::json bind;
  std::shared_ptr<Session> session;  // null for a call without one
  WeightLookup weights;
  std::string model;                 // "ID@HASH" of the model ("": inline weights only)
  // The weights the call gives itself (they shadow the model's).
  std::shared_ptr<const std::map<std::string, Tensor>> inline_weights;
  Limits limits;
  // The outputs by name; the runner has already set the session's retained tensors.
  std::function<void(RunResult)> done;
  // The call fails with this error; a session the call created is forgotten.
  std::function<void(const Error&)> fail;
};

class WorkerCore {
 public:
  struct Hooks {
    // Optional: takes a plain (not batched) generation or graph call and
    // returns true, or returns false to leave it to the CPU here.
    std::function<bool(DeviceCall&)> device_call;
    // Puts a model's files where it can be opened, each checked against its
    // SHA-256, and returns the model's path and fingerprint. Throws Error.
    std::function<std::pair<std::string, ModelFingerprint>(const ModelFetch&)> fetch_model;
    // Optional: the fetched model is open (its weights are in memory), so
    // the files may go (the browser worker's files live in the page's heap).
    std::function<void(const std::string& path)> model_opened;
    // Called when the coordinator refuses this worker (`retry`: for now).
    std::function<void(const std::string& why, bool retry)> on_refused;
    std::function<void(const std::string&)> log;  // lines for the volunteer
  };

  WorkerCore(WorkerCoreOptions options, Hooks hooks);
  ~WorkerCore();  // stops the lanes
  WorkerCore(const WorkerCore&) = delete;
  WorkerCore& operator=(const WorkerCore&) = delete;

  // A link opened: messages go out through `send` from now on (any thread).
  // The hello to send first is hello().
  void link_opened(std::function<void(Message)> send);
  // The link closed: queued work is dropped and graphs registered on it are
  // forgotten; sessions and models stay for the next link.
  void link_closed();
  Message hello();
  // From the link's thread, in arrival order.
  void on_message(Message m);

  // Opens a model held here (a folder or GGUF file) under its fingerprint.
  void add_model(const std::string& path, const ModelFingerprint& fingerprint);
  // Every session is forgotten (a device that held their tensors is lost).
  void drop_sessions();
  // The ops its steps now run on the WebGPU device (WorkerCoreOptions::gpu_ops;
  // empty: none, the device is gone): the next hello announces them.
  void set_gpu_ops(std::vector<std::string> ops);
  // Paths of the models held now (a cache keeps them).
  std::set<std::string> model_paths();

  // What the volunteer sees: id, models, steps served, tokens/s, memory.
  nlohmann::json stats();
  const WorkerCoreOptions& options() const;
  std::string id();  // the coordinator's name for it, once welcomed
  int64_t frame_max() const;  // the largest frame it accepts
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bonfire::net
