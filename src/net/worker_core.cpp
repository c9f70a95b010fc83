#include "net/worker_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/hop_trace.h"
#include "core/threads.h"
#include "graph/batch.h"
#include "graph/executor.h"
#include "graph/session.h"
#include "graph/wire.h"
#include "ir/generation.h"
#include "net/worker_fault.h"
#include "ops/gemm.h"
#include "ops/simd.h"
#include "spec/manifest.h"

namespace bonfire::net {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kProtocol = 3;
constexpr size_t kMaxRegistered = 256;     // decode graphs kept per link
constexpr int64_t kOutputSlack = 1 << 20;  // a reply's header beside its tensors
constexpr size_t kMaxRows = 64;            // sessions in one batched call
constexpr double kRateWindowS = 10;        // tokens/s is counted over this

struct HeldModel {
  ModelFingerprint fingerprint;
  std::string path;
  std::shared_ptr<ir::LocalModel> model;  // shared: a lane may run it while a load replaces it
};

int64_t tensor_bytes(const Message& m) {
  int64_t n = 0;
  for (const auto& [k, t] : m.tensors) n += t.numel() * 4;
  return n;
}

// Work of one kind, run in order on its own thread.
struct Lane {
  explicit Lane(std::string n) : name(std::move(n)) {}
  std::string name;
  std::deque<Message> queue;
  std::thread thread;
  bool busy = false;
};

}  // namespace

struct WorkerCore::Impl {
  WorkerCoreOptions opt;
  Hooks hooks;
  std::map<std::string, HeldModel> models;  // by id
  std::mutex models_mu;
  SessionStore sessions;
  std::mutex sessions_mu;  // last_used
  std::map<std::string, Clock::time_point> last_used;
  std::mutex registered_mu;
  std::map<std::string, std::shared_ptr<const Call>> registered;  // shared: a lane may still run one
  std::deque<std::string> registered_order;

  std::mutex mu;  // the lanes, send, id, served
  std::condition_variable cv;
  Lane steps{"steps"}, graphs{"graphs"}, loads{"loads"};
  std::function<void(Message)> send_fn;
  std::atomic<int64_t> queued_bytes{0};
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> coordinator_frame{int64_t(1) << 30};
  std::string id;
  std::deque<Clock::time_point> served;  // step calls answered within kRateWindowS
  int64_t steps_served = 0;
  std::vector<std::string> gpu_ops;  // opt.gpu_ops until set_gpu_ops
  std::unique_ptr<WorkerFault> fault;  // --fault lie=P,slow=MS (test aids)

  void log(const std::string& s) {
    if (!opt.quiet && hooks.log) hooks.log(s);
  }

  // Where the steps run (hello "device"): this CPU and its SIMD target, and
  // the WebGPU device a browser worker holds beside it.
  json device() {
    json d = {{"type", "cpu"}, {"adapter", simd::simd_target()}};
    if (opt.read_gbs > 0) d["readGBs"] = std::round(opt.read_gbs * 10) / 10;
    if (opt.webgpu.is_object()) d["webgpu"] = opt.webgpu;
    std::lock_guard<std::mutex> lock(mu);
    if (opt.webgpu.is_object() && !gpu_ops.empty()) {
      d["type"] = "webgpu";
      d["adapter"] = opt.webgpu.value("name", std::string("webgpu"));
      d["gpuOps"] = gpu_ops;
    }
    return d;
  }

  // Which products of its steps take int8 activations (hello "int8Rows"): a
  // WebGPU device's matmul widens the weights and keeps f32 activations.
  Int8Rows int8_rule() {
    std::lock_guard<std::mutex> lock(mu);
    if (opt.webgpu.is_object() && std::count(gpu_ops.begin(), gpu_ops.end(), "matmul")) return Int8Rows::None;
    return int8_rows_rule();
  }

  std::set<std::string> features() const {
    std::set<std::string> f = implemented_features();
    f.insert(kBatchedCalls);
    for (const auto& d : opt.disabled_features) f.erase(d);
    return f;
  }

  // `memory` is shared by a frame being received, the queue, the sessions
  // and what one call may create.
  int64_t frame_max() const { return std::clamp<int64_t>(opt.memory / 4, 1 << 20, int64_t(4) << 30); }
  int64_t queue_max() const { return std::max<int64_t>(opt.memory / 4, 1 << 20); }
  int64_t model_max() const { return opt.model_bytes_max > 0 ? opt.model_bytes_max : opt.memory * 4; }

  int64_t session_bytes() {
    std::lock_guard<std::mutex> lock(sessions_mu);
    int64_t total = 0;
    for (const auto& [sid, t] : last_used)
      if (auto s = sessions.get(sid, false)) total += s->bytes();
    return total;
  }

  Limits call_limits(const json& h) {
    Limits l;
    l.max_total_bytes =
        std::max<int64_t>(0, std::min(l.max_total_bytes, opt.memory - session_bytes() - queued_bytes.load()));
    // What the answer may carry: the coordinator's frame limit, and less if it asks.
    l.max_output_bytes = coordinator_frame - kOutputSlack;
    if (h.contains("maxOutputBytes") && h["maxOutputBytes"].is_number_integer())
      l.max_output_bytes = std::min<int64_t>(l.max_output_bytes, h["maxOutputBytes"].get<int64_t>());
    double budget_ms = opt.call_max_s * 1000;
    if (h.contains("timeoutMs") && h["timeoutMs"].is_number())
      budget_ms = std::clamp(h["timeoutMs"].get<double>(), 1.0, budget_ms);
    l.deadline_ms = steady_now_ms() + static_cast<int64_t>(budget_ms);
    return l;
  }

  json hello() {
    json ops = json::array();
    for (const auto& op : op_registry()) ops.push_back(op.name);
    json held = json::array();
    {
      std::lock_guard<std::mutex> lock(models_mu);
      for (const auto& [mid, m] : models)
        held.push_back({{"id", mid}, {"hash", m.fingerprint.hash}, {"layers", m.model->ir()["model"]["n_layers"]}});
    }
    const Limits l;
    json h = {{"type", "hello"},
              {"protocol", kProtocol},
              {"opsHash", spec::ops_manifest().value("opsHash", "")},
              {"id", opt.id},
              {"token", opt.token},
              {"kind", opt.kind},
              {"ops", ops},
              {"features", features()},
              {"limits",
               {{"maxNodes", l.max_nodes},
                {"maxTensorElements", l.max_tensor_elements},
                {"maxRank", l.max_rank},
                {"maxTotalBytes", std::min(l.max_total_bytes, opt.memory)},
                {"maxFrameBytes", frame_max()}}},
              {"threads", num_threads()},
              {"simd", simd::simd_target()},
              {"device", device()},
              {"background", background()},
              {"activations", int8_activations() == Int8Activations::Off ? "exact" : "int8"},
              {"int8Rows", int8_rows_name(int8_rule())},
              {"memory", opt.memory},
              {"fetch", opt.fetch_models},
              {"models", held}};
    if (!opt.local_secret.empty()) h["localSecret"] = opt.local_secret;
    return h;
  }

  void send(Message m) {
    std::function<void(Message)> fn;
    {
      std::lock_guard<std::mutex> lock(mu);
      fn = send_fn;
    }
    if (fn) fn(std::move(m));
  }

  void reply_error(const json& req, const Error& e) {
    send(Message(json{{"type", "error"}, {"req", req}, {"error", error_to_json(e)}}));
  }

  Lane& lane_for(const Message& m) {
    if (m.type() == "load_model") return loads;
    return m.header.value("lane", "") == "graph" ? graphs : steps;
  }

  void on_message(Message m) {
    hop_trace("worker.message_in");
    const std::string type = m.type();
    if (type == "ping") {
      size_t queued;
      {
        std::lock_guard<std::mutex> lock(mu);
        queued = steps.queue.size() + graphs.queue.size() + steps.busy + graphs.busy;
      }
      send(Message(json{{"type", "pong"}, {"t", m.header.value("t", 0.0)}, {"queue", queued}, {"sessions", sessions.size()}}));
    } else if (type == "welcome") {
      {
        std::lock_guard<std::mutex> lock(mu);
        id = m.header.value("id", "");
      }
      const json f = m.header.value("maxFrameBytes", json());
      if (f.is_number_integer() && f.get<int64_t>() > kOutputSlack) coordinator_frame = f.get<int64_t>();
      log("joined " + opt.coordinator + " as " + m.header.value("id", std::string()));
    } else if (type == "refused") {
      const bool retry = m.header.value("retry", false);
      const std::string why = m.header.value("error", std::string("no reason given"));
      log("refused by the coordinator: " + why + (retry ? " (will try again)" : ""));
      if (hooks.on_refused) hooks.on_refused(why, retry);
    } else {
      const int64_t bytes = tensor_bytes(m);
      if (queued_bytes + bytes > queue_max()) {
        const json req = m.header.value("req", json());
        if (!req.is_null())
          reply_error(req, Error(ErrorCode::TooLarge, "this worker's queue is full (" + std::to_string(queue_max()) +
                                                          " bytes, a quarter of its memory); try another worker"));
        return;
      }
      Lane& lane = lane_for(m);
      if (opt.inline_steps && &lane == &steps) return run_step_inline(m);
      queued_bytes += bytes;
      std::lock_guard<std::mutex> lock(mu);
      lane.queue.push_back(std::move(m));
      cv.notify_all();
    }
  }

  // WorkerCoreOptions::inline_steps: the step runs here, on the link's
  // thread, and its answer leaves at once.
  void run_step_inline(Message& m) {
    Int8Scope int8;  // as on the steps lane
    adapt_to_machine_load();
    handle(m);
    count_served(m);
  }

  void count_served(const Message& m) {
    if (m.type() != "run") return;
    std::lock_guard<std::mutex> lock(mu);
    ++steps_served;
    served.push_back(Clock::now());
  }

  void lane_loop(Lane& lane) {
    // The coordinator's generation steps may use int8 activations (ops/gemm.h);
    // a client's graph call keeps the ops' f32 meaning.
    std::optional<Int8Scope> int8;
    if (&lane == &steps) int8.emplace();
    while (true) {
      Message m;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::seconds(5), [&] { return stopping || !lane.queue.empty(); });
        if (stopping) return;
        if (lane.queue.empty()) {
          lock.unlock();
          if (&lane == &steps) expire_sessions();
          continue;
        }
        m = std::move(lane.queue.front());
        lane.queue.pop_front();
        lane.busy = true;
      }
      const int64_t bytes = tensor_bytes(m);
      adapt_to_machine_load();  // background mode: threads follow the volunteer's other load
      handle(m);
      queued_bytes -= bytes;
      {
        std::lock_guard<std::mutex> lock(mu);
        lane.busy = false;
      }
      if (&lane == &steps) count_served(m);
    }
  }

  void expire_sessions() {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lock(sessions_mu);
    for (auto it = last_used.begin(); it != last_used.end();) {
      if (std::chrono::duration<double>(now - it->second).count() > opt.session_ttl_s) {
        sessions.erase(it->first);
        it = last_used.erase(it);
      } else {
        ++it;
      }
    }
  }

  void handle(Message& m) {
    const std::string type = m.type();
    const json req = m.header.value("req", json());
    try {
      if (type == "run") {
        run(m);
      } else if (type == "free") {
        forget({m.header.value("session", "")});
      } else if (type == "load_model") {
        load_model(m);
      } else {
        throw Error(ErrorCode::BadGraph, "unknown message type \"" + type.substr(0, 32) + "\"");
      }
    } catch (const Error& e) {
      if (type == "load_model") log(std::string("did not load the model: ") + e.what());
      if (!req.is_null()) reply_error(req, e);
    } catch (const std::exception& e) {
      if (type == "load_model") log(std::string("did not load the model: ") + e.what());
      if (!req.is_null()) reply_error(req, Error(ErrorCode::Internal, e.what()));
    } catch (...) {  // nothing may end a lane's thread
      if (!req.is_null()) reply_error(req, Error(ErrorCode::Internal, "an unknown failure in \"" + type + "\""));
    }
  }

  std::shared_ptr<const Call> graph_for(const json& h, const Limits& limits, std::map<std::string, Tensor>& inputs,
                                        std::map<std::string, Tensor>& inline_weights) {
    const std::string key = h.value("graph", "");
    if (h.contains("call")) {
      json c = h["call"];
      if (h.contains("session") && c.is_object()) c["session"] = h["session"];
      // A batched call's sessions are its rows': its graph (whose session
      // refs the parser checks against a named session) is parsed as the
      // first row's, and kept without one. A step scheduler may send a
      // graph first in a batched call, to a worker that never saw it alone.
      const json& rows = h.value("rows", json());
      const bool batched = rows.is_array() && !rows.empty() && rows[0].is_object() && rows[0].contains("session");
      if (batched && c.is_object() && !c.contains("session")) c["session"] = rows[0]["session"];
      Call parsed = Call::parse(c, limits, inputs, inline_weights);
      if (batched) parsed.session.clear();
      auto call = std::make_shared<const Call>(std::move(parsed));
      if (!key.empty()) {
        std::lock_guard<std::mutex> lock(registered_mu);
        if (!registered.count(key)) {
          if (registered.size() >= kMaxRegistered) {
            registered.erase(registered_order.front());
            registered_order.pop_front();
          }
          registered_order.push_back(key);
        }
        registered[key] = call;
      }
      return call;
    }
    std::lock_guard<std::mutex> lock(registered_mu);
    auto it = registered.find(key);
    if (it == registered.end())
      throw Error(ErrorCode::BadGraph, "graph \"" + key.substr(0, 64) + "\" is not registered on this worker");
    return it->second;
  }

  void run(Message& m) {
    hop_trace("worker.run");
    const json& h = m.header;
    const auto t0 = Clock::now();
    std::map<std::string, Tensor> inputs, inline_weights;
    for (auto& [name, t] : m.tensors) {
      if (name.rfind("in:", 0) == 0) inputs[name.substr(3)] = std::move(t);
      else if (name.rfind("w:", 0) == 0) inline_weights[name.substr(2)] = std::move(t);
    }
    const Limits limits = call_limits(h);
    const std::shared_ptr<const Call> call = graph_for(h, limits, inputs, inline_weights);
    require_features(call->graph, features());
    const std::string model_id = h.value("model", call->model);
    std::shared_ptr<const ir::LocalModel> model;
    std::string model_hash;
    if (!model_id.empty()) {
      std::lock_guard<std::mutex> lock(models_mu);
      auto it = models.find(model_id);
      if (it == models.end())
        throw Error(ErrorCode::BadGraph, "this worker does not hold model \"" + model_id.substr(0, 64) + "\"");
      model = it->second.model;
      model_hash = it->second.fingerprint.hash;
    }
    // The call's own weights (this message's, else the registered graph's,
    // kept alive by `call`), then the model's. Shared, not copied: a device
    // call may outlive this function.
    using WeightMap = std::map<std::string, Tensor>;
    const std::shared_ptr<const WeightMap> weights =
        inline_weights.empty() ? std::shared_ptr<const WeightMap>(call, &call->weights)
                               : std::make_shared<const WeightMap>(std::move(inline_weights));
    const WeightLookup lookup = [weights, model](const std::string& name) -> const Tensor* {
      auto it = weights->find(name);
      if (it != weights->end()) return &it->second;
      return model ? model->weights().find(name) : nullptr;
    };
    // A checker's rule for int8 activations (docs/PROTOCOL-EXTENSIONS.md,
    // "Checks"): "int8Rows" names the checked worker's; "stepNumerics" is
    // every row as this worker's one-token step. Such calls stay on the CPU,
    // whose rule they name.
    std::optional<Int8Rows> rule;
    if (h.contains("int8Rows")) {
      Int8Rows r;
      if (!h["int8Rows"].is_string() || !parse_int8_rows(h["int8Rows"].get<std::string>(), &r))
        throw Error(ErrorCode::BadGraph, "run: \"int8Rows\" must be \"none\", \"few\" or \"any\"");
      rule = r;
    } else if (h.value("stepNumerics", false)) {
      rule = int8_rows_rule() == Int8Rows::None ? Int8Rows::None : Int8Rows::Any;
    }
    // One row per session: a plain call is one row (graph/batch.h for many).
    const bool batched = h.contains("rows");
    std::vector<std::string> sids;
    std::vector<json> binds;
    if (batched) {
      parse_batch_rows(h["rows"], kMaxRows, sids, binds);
    } else {
      sids.push_back(h.value("session", call->session));
      binds.push_back(h.value("bind", call->bind));
    }
    std::vector<std::shared_ptr<Session>> held;
    std::vector<std::string> created;
    for (const auto& sid : sids) {
      if (sid.empty()) {
        held.push_back(nullptr);
        continue;
      }
      std::shared_ptr<Session> session = sessions.get(sid, false);
      if (!session) {
        session = sessions.get(sid, true);
        created.push_back(sid);
      }
      held.push_back(session);
      std::lock_guard<std::mutex> lock(sessions_mu);
      last_used[sid] = Clock::now();
    }
    if (hooks.device_call && !batched && !fault && !rule) {
      DeviceCall dc;
      dc.call = call;
      dc.inputs = inputs.empty() ? call->inputs : inputs;
      dc.bind = binds[0];
      dc.session = held[0];
      dc.weights = lookup;
      dc.inline_weights = weights;
      dc.model = model ? model_id + "@" + model_hash : "";
      dc.limits = limits;
      const json req = h["req"];
      dc.done = [this, req, t0](RunResult r) { send_result(req, t0, std::move(r)); };
      dc.fail = [this, req, created](const Error& e) {
        forget(created);
        reply_error(req, e);
      };
      if (hooks.device_call(dc)) return;
    }
    RunResult r;
    // --fault slow=MS: this call waits; lie=P: its answer will be wrong
    // (worker_fault.h).
    if (fault && fault->slow_ms() > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(fault->slow_ms() * 1000)));
    std::vector<WorkerFault::Sampled> sampled;
    std::optional<Graph> lying;
    const std::vector<int64_t> lie_on = fault ? fault->lie_now(static_cast<int64_t>(held.size())) : std::vector<int64_t>();
    if (!lie_on.empty()) lying = WorkerFault::with_sample_logits(call->graph, &sampled);
    const Graph& graph = lying ? *lying : call->graph;
    std::optional<Int8RowsScope> checker_rule;
    if (rule) checker_rule.emplace(*rule);
    try {
      const auto& in = inputs.empty() ? call->inputs : inputs;
      if (batched) {
        std::vector<BatchRow> rows;
        for (size_t i = 0; i < held.size(); ++i) rows.push_back({held[i].get(), binds[i]});
        r = run_graph_rows(graph, in, rows, lookup, limits);
      } else {
        r = run_graph(graph, in, binds[0], lookup, held[0].get(), limits);
      }
    } catch (...) {
      forget(created);
      throw;
    }
    if (lying)
      for (const std::string& lie : fault->tell(r.outputs, sampled, binds, lie_on))
        log("fault: lied on call " + h["req"].dump() + ": " + lie);
    send_result(h["req"], t0, std::move(r));
  }

  void send_result(const json& req, Clock::time_point t0, RunResult r) {
    rest_threads();  // the answer goes out now; polling helpers would hold the cores the I/O threads need
    Message out(json{{"type", "result"},
                     {"req", req},
                     {"ms", std::chrono::duration<double, std::milli>(Clock::now() - t0).count()}});
    hop_trace("worker.answer");
    out.tensors = std::move(r.outputs);
    send(std::move(out));
  }

  void forget(const std::vector<std::string>& sids) {
    for (const auto& sid : sids) {
      sessions.erase(sid);
      std::lock_guard<std::mutex> lock(sessions_mu);
      last_used.erase(sid);
    }
  }

  void forget_all() {
    std::vector<std::string> sids;
    {
      std::lock_guard<std::mutex> lock(sessions_mu);
      for (const auto& [sid, when] : last_used) sids.push_back(sid);
    }
    forget(sids);
  }

  void load_model(Message& m) {
    const json& h = m.header;
    if (!opt.fetch_models || !hooks.fetch_model)
      throw Error(ErrorCode::BadGraph, "this worker does not accept models (--no-fetch)");
    const ModelFetch f = parse_model_fetch(h, model_max(), opt.memory);
    bool held;
    {
      std::lock_guard<std::mutex> lock(models_mu);
      held = models.count(f.model) && models[f.model].fingerprint.hash == f.hash;
    }
    if (!held) {
      const auto [path, fingerprint] = hooks.fetch_model(f);
      add_model(path, fingerprint);
      if (hooks.model_opened) hooks.model_opened(path);
    }
    send(Message(json{{"type", "result"}, {"req", h["req"]}, {"model", f.model}, {"hash", f.hash}}));
  }

  void add_model(const std::string& path, const ModelFingerprint& fingerprint) {
    HeldModel held;
    held.fingerprint = fingerprint;
    held.path = path;
    ir::LocalModel::Options o;
    o.tokenizer = false;  // the coordinator tokenizes; a worker runs graphs
    int64_t bytes = 0;
    for (const auto& f : fingerprint.files) bytes += f.bytes;
    o.widen_half = bytes > 0 && bytes <= opt.widen_half_max;
    held.model = ir::LocalModel::open(path, o);
    log("holds " + fingerprint.id + " (" + fingerprint.hash.substr(0, 12) + ")");
    std::lock_guard<std::mutex> lock(models_mu);
    models[fingerprint.id] = std::move(held);
  }
};

WorkerCore::WorkerCore(WorkerCoreOptions options, Hooks hooks) : impl_(new Impl) {
  Impl& w = *impl_;
  w.opt = std::move(options);
  w.hooks = std::move(hooks);
  w.gpu_ops = w.opt.gpu_ops;
  if (!w.opt.fault.empty()) w.fault = std::make_unique<WorkerFault>(w.opt.fault, w.opt.fault_seed);
  for (Lane* lane : {&w.steps, &w.graphs, &w.loads}) lane->thread = std::thread([&w, lane] { w.lane_loop(*lane); });
}

WorkerCore::~WorkerCore() {
  stop();
  for (Lane* lane : {&impl_->steps, &impl_->graphs, &impl_->loads})
    if (lane->thread.joinable()) lane->thread.join();
}

void WorkerCore::stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->stopping = true;
  impl_->cv.notify_all();
}

void WorkerCore::link_opened(std::function<void(Message)> send) {
  {
    std::lock_guard<std::mutex> lock(impl_->registered_mu);
    impl_->registered.clear();  // the lanes hold shared_ptrs to any they still run
    impl_->registered_order.clear();
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->send_fn = std::move(send);
  impl_->id.clear();  // until this link's welcome
}

void WorkerCore::link_closed() {
  Impl& w = *impl_;
  std::lock_guard<std::mutex> lock(w.mu);
  w.send_fn = nullptr;
  for (Lane* lane : {&w.steps, &w.graphs, &w.loads}) {
    for (const auto& m : lane->queue) w.queued_bytes -= tensor_bytes(m);
    lane->queue.clear();
  }
}

Message WorkerCore::hello() { return Message(impl_->hello()); }
void WorkerCore::on_message(Message m) { impl_->on_message(std::move(m)); }
void WorkerCore::add_model(const std::string& path, const ModelFingerprint& fp) { impl_->add_model(path, fp); }
const WorkerCoreOptions& WorkerCore::options() const { return impl_->opt; }
int64_t WorkerCore::frame_max() const { return impl_->frame_max(); }

std::string WorkerCore::id() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->id;
}

void WorkerCore::drop_sessions() { impl_->forget_all(); }
void WorkerCore::set_gpu_ops(std::vector<std::string> ops) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->gpu_ops = std::move(ops);
}
std::set<std::string> WorkerCore::model_paths() {
  std::set<std::string> paths;
  std::lock_guard<std::mutex> lock(impl_->models_mu);
  for (const auto& [mid, m] : impl_->models) paths.insert(m.path);
  return paths;
}

json WorkerCore::stats() {
  Impl& w = *impl_;
  json models = json::array();
  {
    std::lock_guard<std::mutex> lock(w.models_mu);
    for (const auto& [mid, m] : w.models) {
      int64_t bytes = 0;
      for (const auto& f : m.fingerprint.files) bytes += f.bytes;
      models.push_back({{"id", mid}, {"layers", m.model->ir()["model"]["n_layers"]}, {"bytes", bytes}});
    }
  }
  const int64_t sessions_bytes = w.session_bytes();
  std::lock_guard<std::mutex> lock(w.mu);
  const auto now = Clock::now();
  while (!w.served.empty() && std::chrono::duration<double>(now - w.served.front()).count() > kRateWindowS)
    w.served.pop_front();
  double rate = 0;
  if (w.served.size() > 1)
    rate = static_cast<double>(w.served.size() - 1) /
           std::max(1e-3, std::chrono::duration<double>(w.served.back() - w.served.front()).count());
  return {{"id", w.id},
          {"models", models},
          {"steps", w.steps_served},
          {"tokensPerSecond", rate},
          {"sessions", w.sessions.size()},
          {"sessionBytes", sessions_bytes},
          {"queued", w.steps.queue.size() + w.graphs.queue.size() + w.loads.queue.size()},
          {"threads", num_threads()},
          {"simd", simd::simd_target()},
          {"memory", {{"limit", w.opt.memory}}}};
}

}  // namespace bonfire::net
