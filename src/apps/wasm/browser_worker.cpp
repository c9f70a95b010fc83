// The browser worker: net/WorkerCore compiled to WebAssembly, driven by
// web/lend-worker.js, which runs it inside a dedicated Web Worker and owns
// everything only a browser can do: the WebSocket to the coordinator, the
// model downloads (fetch, SHA-256 by crypto.subtle, the Cache API) and the
// page's view. The split, so the C++ stays the native worker's:
//
//   JS → C++ (on the Web Worker's own thread, never blocking on work)
//     bf_start(options JSON)        once: memory, threads, token, id
//     bf_link_opened()              the WebSocket is open: the hello goes out
//     bf_receive(bytes, n)          one frame from the coordinator (C++ frees it)
//     bf_link_closed()              queued work dropped; sessions and models stay
//     bf_fetched(id, error)         a model fetch asked for below finished
//     bf_stats() → JSON             for the page (JS frees it)
//     bf_profile(on) → text         per-op timings, for tuning (JS frees it)
//   C++ → JS (queued to the Web Worker's thread from any thread)
//     Module.bfSend(ptr, n)         a frame to send (JS copies it, then frees)
//     Module.bfFetch(id, JSON)      fetch and verify these files into MEMFS
//     Module.bfRefused(why, retry)  the coordinator refused the hello
//     Module.bfLog(text)
//
// Generation steps run on the Web Worker's own thread (inline_steps), helped
// by the compute pool's pthreads: a hop to another thread and back would be
// two trips through the event loop per token. Model loads and clients' own
// graphs run on the core's lanes (pthreads), so a download or a long graph
// leaves the thread free.
#include <emscripten.h>
#include <emscripten/heap.h>
#include <emscripten/threading.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "apps/wasm/gpu_steps.h"
#include "apps/wasm/js_owned.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "core/threads.h"
#include "graph/batch.h"
#include "graph/profile.h"
#include "kernels/gpu_ops.h"
#include "net/frame.h"
#include "net/worker_core.h"

using namespace bonfire;
using namespace bonfire::net;
using bonfire::wasm::js_owned;

namespace {

std::unique_ptr<WorkerCore> g_core;
Limits g_frame_limits;

// Time spent on frames from the coordinator (bf_profile): decoding them,
// and handling them (a step runs inside, inline_steps).
struct FrameTimes {
  int64_t frames = 0;
  double decode_ms = 0, handle_ms = 0;
};
FrameTimes g_frame_times;

// Fetches waiting for the page: id → outcome.
struct PendingFetch {
  bool done = false;
  std::string error;
  std::string request;  // kept alive while JS reads it
};
std::mutex g_fetch_mu;
std::condition_variable g_fetch_cv;
std::map<int, PendingFetch> g_fetches;
int g_next_fetch = 1;

void to_js_log(const std::string& text) {
  MAIN_THREAD_ASYNC_EM_ASM({ Module.bfLog(UTF8ToString($0)); _free($0); }, js_owned(text));
}

void send_frame(const Message& m) {
  const std::string bytes = encode_message(m);
  char* p = static_cast<char*>(std::malloc(bytes.size()));
  std::memcpy(p, bytes.data(), bytes.size());
  MAIN_THREAD_ASYNC_EM_ASM({ Module.bfSend($0, $1); }, p, bytes.size());
}

// On a lane: asks the page to fetch the files into /models/<hash>/<model>/
// and waits. The page checks each file's SHA-256 before writing it.
std::pair<std::string, ModelFingerprint> fetch_model(const ModelFetch& f) {
  const std::string dir = "/models/" + f.hash + "/" + f.model;
  json files = json::array();
  for (const auto& file : f.files)
    files.push_back({{"name", file.name}, {"sha256", file.sha256}, {"bytes", file.bytes}});
  int id;
  const char* request;
  {
    std::lock_guard<std::mutex> lock(g_fetch_mu);
    id = g_next_fetch++;
    PendingFetch& p = g_fetches[id];
    p.request = json{{"model", f.model}, {"hash", f.hash}, {"dir", dir}, {"files", files}}.dump();
    request = p.request.c_str();
  }
  MAIN_THREAD_ASYNC_EM_ASM({ Module.bfFetch($0, UTF8ToString($1)); }, id, request);
  std::unique_lock<std::mutex> lock(g_fetch_mu);
  g_fetch_cv.wait(lock, [&] { return g_fetches[id].done; });
  const std::string error = g_fetches[id].error;
  g_fetches.erase(id);
  if (!error.empty()) throw Error(ErrorCode::BadGraph, "model " + f.model + ": " + error);
  ModelFingerprint fp;
  fp.id = f.model;
  fp.hash = f.hash;
  fp.files = f.files;
  return {dir, fp};
}

// Whether a typed catch matches in this build (see WASM_FLAGS in
// cmake/wasm.cmake): without it every error would end as "an unknown failure".
__attribute__((noinline)) bool typed_catch_works(volatile int probe) {
  try {
    if (probe) throw Error(ErrorCode::BadGraph, "probe");
  } catch (const Error&) {
    return true;
  } catch (...) {
  }
  return false;
}

}  // namespace

extern "C" {

// Options: {"token", "id", "memory" (bytes), "threads", "coordinator" (for the log), "webgpu" (the
// tab's WebGPU device as web/webgpu.js describes it, or null), "gpuSteps" (run steps on it)}. Returns 0, or 1 with
// the reason logged.
EMSCRIPTEN_KEEPALIVE int bf_start(const char* options_json) {
  if (!typed_catch_works(1)) {
    to_js_log("cannot start: this build of the worker cannot catch C++ exceptions by type (see cmake/wasm.cmake)");
    return 1;
  }
  try {
    const json o = parse_json(options_json, "the lend page's options");
    WorkerCoreOptions c;
    c.kind = "browser";
    c.token = o.value("token", "");
    c.id = o.value("id", "");
    c.coordinator = o.value("coordinator", "");
    if (o.contains("webgpu") && o["webgpu"].is_object()) c.webgpu = o["webgpu"];
    // Steps on the tab's GPU (apps/wasm/gpu_steps.h) when the page holds the
    // device open for them; a session then lives on the GPU, which the
    // batched calls' CPU runner cannot read, so those are not announced.
    std::function<bool(DeviceCall&)> gpu_hook;
    if (c.webgpu.is_object() && o.value("gpuSteps", false)) {
      gpu_hook = wasm::gpu_step_hook(kernels::parse_device(c.webgpu, "the tab's WebGPU adapter"));
      c.gpu_ops = kernels::gpu_op_names();
      c.disabled_features.insert(kBatchedCalls);
    }
    c.memory = std::max<int64_t>(o.value("memory", int64_t(1) << 30), 16 << 20);
    // The weights are copied into the WebAssembly heap: a model must fit the
    // memory the volunteer set, beside the sessions' share.
    c.model_bytes_max = c.memory * 3 / 4;
    // WebAssembly has no f16 conversion instruction: half-precision weights
    // are widened to f32 at load when twice their size still fits.
    c.widen_half_max = c.model_bytes_max / 2;
    // A step's answer then leaves without two hops through the event loop.
    c.inline_steps = true;
    set_num_threads(std::max(1, o.value("threads", 1)));
    WorkerCore::Hooks h;
    h.fetch_model = fetch_model;
    h.model_opened = [](const std::string& path) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);  // the weights are in the heap now
    };
    h.on_refused = [](const std::string& why, bool retry) {
      MAIN_THREAD_ASYNC_EM_ASM({ Module.bfRefused(UTF8ToString($0), $1); _free($0); }, js_owned(why), retry ? 1 : 0);
    };
    h.log = to_js_log;
    h.device_call = gpu_hook;
    g_core = std::make_unique<WorkerCore>(c, h);
    wasm::set_gpu_core(g_core.get());
    g_frame_limits.max_total_bytes = g_core->frame_max();
    return 0;
  } catch (const std::exception& e) {
    to_js_log(std::string("cannot start: ") + e.what());
    return 1;
  }
}

EMSCRIPTEN_KEEPALIVE void bf_link_opened() {
  if (!g_core) return;
  g_core->link_opened([](Message m) { send_frame(m); });
  send_frame(g_core->hello());
}

EMSCRIPTEN_KEEPALIVE void bf_link_closed() {
  if (g_core) g_core->link_closed();
}

// Takes ownership of `bytes` (allocated by JS with _malloc).
EMSCRIPTEN_KEEPALIVE int bf_receive(char* bytes, int n) {
  std::unique_ptr<char, decltype(&std::free)> own(bytes, std::free);
  if (!g_core) return 1;
  try {
    const double t0 = emscripten_get_now();
    Message m = decode_message(std::string_view(bytes, static_cast<size_t>(n)), g_frame_limits);
    const double t1 = emscripten_get_now();
    g_core->on_message(std::move(m));
    ++g_frame_times.frames;
    g_frame_times.decode_ms += t1 - t0;
    g_frame_times.handle_ms += emscripten_get_now() - t1;
    return 0;
  } catch (const std::exception& e) {
    to_js_log(std::string("garbage from the coordinator: ") + e.what());
    return 1;  // the page closes the link, as the native worker does
  }
}

// `error` null or empty: the files are in place.
EMSCRIPTEN_KEEPALIVE void bf_fetched(int id, const char* error) {
  std::lock_guard<std::mutex> lock(g_fetch_mu);
  auto it = g_fetches.find(id);
  if (it == g_fetches.end()) return;
  it->second.done = true;
  it->second.error = error ? error : "";
  g_fetch_cv.notify_all();
}

EMSCRIPTEN_KEEPALIVE char* bf_stats() {
  if (!g_core) return js_owned("{}");
  json s = g_core->stats();
  s["memory"]["heap"] = static_cast<int64_t>(emscripten_get_heap_size());
  return js_owned(s.dump());
}

// Per-op timings (graph/profile.h) for whoever tunes the browser worker:
// on = 1 starts recording afresh, 0 stops; returns the table so far (JS frees it).
EMSCRIPTEN_KEEPALIVE char* bf_profile(int on) {
  const FrameTimes& f = g_frame_times;
  char line[160];
  std::snprintf(line, sizeof line, "frames from the coordinator: %lld, %.3f ms decoding and %.3f ms handling each\n",
                static_cast<long long>(f.frames), f.frames ? f.decode_ms / f.frames : 0.0,
                f.frames ? f.handle_ms / f.frames : 0.0);
  const std::string report = line + profile_report();
  g_frame_times = {};
  profile_reset();
  set_profiling(on != 0);
  return js_owned(report);
}

EMSCRIPTEN_KEEPALIVE void bf_stop() {
  if (g_core) g_core->stop();
}

}  // extern "C"

int main() {
  // Stay alive after main: the page drives everything through the exports.
  emscripten_exit_with_live_runtime();
  return 0;
}
