#include "net/worker.h"

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

#include "core/error.h"
#include "core/threads.h"
#include "graph/batch.h"
#include "graph/executor.h"
#include "graph/session.h"
#include "graph/wire.h"
#include "ir/generation.h"
#include "net/dial.h"
#include "net/link.h"
#include "net/model_cache.h"
#include "net/model_hash.h"
#include "net/tls.h"
#include "net/url.h"
#include "net/worker_fault.h"
#include "ops/gemm.h"
#include "ops/simd.h"
#include "spec/manifest.h"

namespace bonfire::net {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int64_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

namespace {

constexpr int kProtocol = 3;
constexpr size_t kMaxRegistered = 256;  // decode graphs kept per link
constexpr int64_t kOutputSlack = 1 << 20;  // a reply's header beside its tensors
constexpr size_t kMaxRows = 64;            // sessions in one batched call

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
  std::string name;
  std::deque<Message> queue;
  std::thread thread;
  bool busy = false;
};

}  // namespace

struct Worker::Impl {
  WorkerOptions opt;
  std::map<std::string, HeldModel> models;  // by id
  std::mutex models_mu;
  SessionStore sessions;
  std::mutex sessions_mu;  // last_used
  std::map<std::string, Clock::time_point> last_used;
  std::mutex registered_mu;
  std::map<std::string, std::shared_ptr<const Call>> registered;  // shared: a lane may still run one
  std::deque<std::string> registered_order;

  std::mutex mu;  // the lanes, link, ioc
  std::condition_variable cv;
  Lane steps{"steps"}, graphs{"graphs"}, loads{"loads"};
  std::atomic<int64_t> queued_bytes{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> refused{false};        // for good: exit
  std::atomic<bool> refused_retry{false};  // for now: try again
  std::atomic<int64_t> coordinator_frame{int64_t(1) << 30};
  std::shared_ptr<Link> link;
  asio::io_context* ioc = nullptr;
  std::string id;
  Url url;
  std::unique_ptr<LieFault> lie;  // --fault lie=P (a test aid)
  std::unique_ptr<TlsClient> tls;  // for an https:// or wss:// coordinator

  void log(const std::string& s) {
    if (!opt.quiet) std::cerr << "bonfire worker: " << s << std::endl;
  }

  std::set<std::string> features() const {
    std::set<std::string> f = implemented_features();
    f.insert(kBatchedCalls);
    for (const auto& d : opt.disabled_features) f.erase(d);
    return f;
  }

  // --memory is shared by a frame being received, the queue, the sessions
  // and what one call may create.
  int64_t frame_max() const { return std::clamp<int64_t>(opt.memory / 4, 1 << 20, int64_t(4) << 30); }
  int64_t queue_max() const { return std::max<int64_t>(opt.memory / 4, 1 << 20); }

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
              {"background", background()},
              {"activations", int8_activations() == Int8Activations::Off ? "exact" : "int8"},
              {"memory", opt.memory},
              {"fetch", opt.fetch_models},
              {"models", held}};
    if (!opt.local_secret.empty()) h["localSecret"] = opt.local_secret;
    return h;
  }

  void send(Message m) {
    std::shared_ptr<Link> l;
    {
      std::lock_guard<std::mutex> lock(mu);
      l = link;
    }
    if (l) l->send(m);
  }

  void reply_error(const json& req, const Error& e) {
    send(Message(json{{"type", "error"}, {"req", req}, {"error", error_to_json(e)}}));
  }

  Lane& lane_for(const Message& m) {
    if (m.type() == "load_model") return loads;
    return m.header.value("lane", "") == "graph" ? graphs : steps;
  }

  // On the link's thread: answer pings at once, queue the rest in order.
  void on_message(Message m) {
    const std::string type = m.type();
    if (type == "ping") {
      size_t queued;
      {
        std::lock_guard<std::mutex> lock(mu);
        queued = steps.queue.size() + graphs.queue.size() + steps.busy + graphs.busy;
      }
      send(Message(json{{"type", "pong"}, {"t", m.header.value("t", 0.0)}, {"queue", queued}, {"sessions", sessions.size()}}));
    } else if (type == "welcome") {
      id = m.header.value("id", "");
      const json f = m.header.value("maxFrameBytes", json());
      if (f.is_number_integer() && f.get<int64_t>() > kOutputSlack) coordinator_frame = f.get<int64_t>();
      log("joined " + url.base() + " as " + id);
    } else if (type == "refused") {
      const bool retry = m.header.value("retry", false);
      log("refused by the coordinator: " + m.header.value("error", std::string("no reason given")) +
          (retry ? " (will try again)" : ""));
      (retry ? refused_retry : refused) = true;
      if (link) link->close("refused");
    } else {
      const int64_t bytes = tensor_bytes(m);
      if (queued_bytes + bytes > queue_max()) {
        const json req = m.header.value("req", json());
        if (!req.is_null())
          reply_error(req, Error(ErrorCode::TooLarge, "this worker's queue is full (" + std::to_string(queue_max()) +
                                                          " bytes, --memory / 4); try another worker"));
        return;
      }
      queued_bytes += bytes;
      std::lock_guard<std::mutex> lock(mu);
      lane_for(m).queue.push_back(std::move(m));
      cv.notify_all();
    }
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
      std::lock_guard<std::mutex> lock(mu);
      lane.busy = false;
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
        const std::string sid = m.header.value("session", "");
        sessions.erase(sid);
        std::lock_guard<std::mutex> lock(sessions_mu);
        last_used.erase(sid);
      } else if (type == "load_model") {
        load_model(m);
      } else {
        throw Error(ErrorCode::BadGraph, "unknown message type \"" + type.substr(0, 32) + "\"");
      }
    } catch (const Error& e) {
      if (!req.is_null()) reply_error(req, e);
    } catch (const std::exception& e) {
      if (!req.is_null()) reply_error(req, Error(ErrorCode::Internal, e.what()));
    }
  }

  std::shared_ptr<const Call> graph_for(const json& h, const Limits& limits, std::map<std::string, Tensor>& inputs,
                                        std::map<std::string, Tensor>& inline_weights) {
    const std::string key = h.value("graph", "");
    if (h.contains("call")) {
      json c = h["call"];
      if (h.contains("session") && c.is_object()) c["session"] = h["session"];
      auto call = std::make_shared<const Call>(Call::parse(c, limits, inputs, inline_weights));
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
    if (!model_id.empty()) {
      std::lock_guard<std::mutex> lock(models_mu);
      auto it = models.find(model_id);
      if (it == models.end())
        throw Error(ErrorCode::BadGraph, "this worker does not hold model \"" + model_id.substr(0, 64) + "\"");
      model = it->second.model;
    }
    const std::map<std::string, Tensor>& weights = inline_weights.empty() ? call->weights : inline_weights;
    const WeightLookup lookup = [&](const std::string& name) -> const Tensor* {
      auto it = weights.find(name);
      if (it != weights.end()) return &it->second;
      return model ? model->weights().find(name) : nullptr;
    };
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
    RunResult r;
    // --fault lie=P: this call's answer will be wrong (worker_fault.h).
    std::vector<LieFault::Sampled> sampled;
    std::optional<Graph> lying;
    if (lie && lie->lie_now()) lying = LieFault::with_sample_logits(call->graph, &sampled);
    const Graph& graph = lying ? *lying : call->graph;
    // "stepNumerics": every row computed as its one-token step was (a
    // checker's recomputation; docs/PROTOCOL-EXTENSIONS.md).
    std::optional<Int8AnyRowsScope> step_numerics;
    if (h.value("stepNumerics", false)) step_numerics.emplace();
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
      // A refused call leaves no trace, not even an empty new session.
      for (const auto& sid : created) {
        sessions.erase(sid);
        std::lock_guard<std::mutex> lock(sessions_mu);
        last_used.erase(sid);
      }
      throw;
    }
    if (lying) log("fault: lied on call " + h["req"].dump() + ": " + lie->tell(r.outputs, sampled));
    Message out(json{{"type", "result"},
                     {"req", h["req"]},
                     {"ms", std::chrono::duration<double, std::milli>(Clock::now() - t0).count()}});
    out.tensors = std::move(r.outputs);
    send(std::move(out));
  }

  // Makes room for `need` more bytes under --cache-max (model_cache.h),
  // keeping the models this worker holds now.
  void make_room(int64_t need, const fs::path& keep) {
    std::set<std::string> held;
    {
      std::lock_guard<std::mutex> lock(models_mu);
      for (const auto& [mid, m] : models) held.insert(m.path);
    }
    make_cache_room(opt.cache_dir, opt.cache_max, need, keep, held, [this](const std::string& s) { log(s); });
  }

  void load_model(Message& m) {
    const json& h = m.header;
    if (!opt.fetch_models) throw Error(ErrorCode::BadGraph, "this worker does not accept models (--no-fetch)");
    const std::string mid = h.value("model", "");
    const std::string hash = h.value("hash", "");
    if (!safe_name(mid) || !safe_name(hash)) throw Error(ErrorCode::BadGraph, "load_model: bad model id or hash");
    {
      std::lock_guard<std::mutex> lock(models_mu);
      if (models.count(mid) && models[mid].fingerprint.hash == hash) {
        send(Message(json{{"type", "result"}, {"req", h["req"]}, {"model", mid}, {"hash", hash}}));
        return;
      }
    }
    const fs::path dir = fs::path(opt.cache_dir) / hash / mid;
    std::error_code ec;
    const bool existed = fs::exists(dir, ec);
    try {
      int64_t total = 0, missing = 0;
      std::vector<json> files;
      for (const auto& f : h.at("files")) {
        const std::string name = f.at("name");
        const int64_t bytes = f.at("bytes");
        if (!safe_name(name)) throw Error(ErrorCode::BadGraph, "load_model: bad file name");
        if (bytes < 0) throw Error(ErrorCode::BadGraph, "load_model: negative file size");
        total += bytes;
        if (total > opt.memory * 4)
          throw Error(ErrorCode::TooLarge, "model " + mid + " is larger than this worker accepts");
        if (!fs::exists(dir / name, ec)) missing += bytes;
        files.push_back(f);
      }
      make_room(missing, dir);
      fs::create_directories(dir);
      for (const auto& f : files) {
        const std::string name = f.at("name");
        const std::string sha = f.at("sha256");
        const int64_t bytes = f.at("bytes");
        const fs::path file = dir / name;
        if (fs::exists(file, ec) && sha256_file(file.string()) == sha) continue;
        log("fetching " + mid + "/" + name + " (" + std::to_string(bytes >> 20) + " MiB)");
        http_download(url, tls.get(), "/api/v3/models/" + mid + "/files/" + name, file.string(), bytes, opt.token);
        if (sha256_file(file.string()) != sha)
          throw Error(ErrorCode::BadGraph, "model " + mid + ": " + name + " does not match its SHA-256; removed");
      }
      fs::last_write_time(dir, fs::file_time_type::clock::now(), ec);
      add_model(dir.string());
    } catch (...) {
      // A failed download or load leaves nothing behind for the next try to trust.
      if (!existed) {
        fs::remove_all(dir, ec);
        if (fs::is_empty(dir.parent_path(), ec)) fs::remove(dir.parent_path(), ec);
      }
      throw;
    }
    send(Message(json{{"type", "result"}, {"req", h["req"]}, {"model", mid}, {"hash", hash}}));
  }

  void add_model(const std::string& path) {
    HeldModel held;
    held.fingerprint = fingerprint_model(path);
    held.path = path;
    held.model = ir::LocalModel::open(path, {});
    log("holds " + held.fingerprint.id + " (" + held.fingerprint.hash.substr(0, 12) + ")");
    std::lock_guard<std::mutex> lock(models_mu);
    models[held.fingerprint.id] = std::move(held);
  }

  // One connection: returns when the link closes (false: it never opened;
  // `refused` set when it never will).
  bool connect_once() {
    asio::io_context io;
    std::optional<LinkStream> ws;
    try {
      ws.emplace(dial_link(io, url, tls.get()));
    } catch (const DialError& e) {
      if (e.kind == DialError::Kind::Refused) {
        log("cannot join " + url.base() + ": " + e.what());
        refused = true;
      } else if (e.kind == DialError::Kind::Failed) {
        log(e.what());
      }
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(registered_mu);
      registered.clear();  // the lanes hold shared_ptrs to any they still run
      registered_order.clear();
    }
    Link::Options lo;
    lo.max_frame_bytes = static_cast<uint64_t>(frame_max());
    lo.max_queue_bytes = static_cast<uint64_t>(std::max<int64_t>(opt.memory / 4, 64 << 20));
    auto l = std::visit([&](auto& s) { return std::make_shared<Link>(std::move(s), lo); }, *ws);
    {
      std::lock_guard<std::mutex> lock(mu);
      link = l;
      ioc = &io;
    }
    io.restart();
    l->start([this](Message m) { on_message(std::move(m)); },
             [this, &io](const std::string& why) {
               if (!stopping) log("link closed: " + why);
               io.stop();  // do not wait for the link's timers: reconnect now
             });
    l->send(Message(hello()));
    io.run();
    std::lock_guard<std::mutex> lock(mu);
    link.reset();
    ioc = nullptr;
    for (Lane* lane : {&steps, &graphs, &loads}) {
      for (const auto& m : lane->queue) queued_bytes -= tensor_bytes(m);
      lane->queue.clear();
    }
    return true;
  }
};

Worker::Worker(WorkerOptions options) : impl_(new Impl) {
  impl_->opt = std::move(options);
  if (impl_->opt.memory <= 0) impl_->opt.memory = available_memory();
  if (impl_->opt.memory <= 0) impl_->opt.memory = int64_t(4) << 30;
  if (impl_->opt.cache_dir.empty()) {
    const char* home = getenv("HOME");
    impl_->opt.cache_dir = std::string(home ? home : "/tmp") + "/.cache/bonfire/models";
  }
  impl_->url = parse_join_url(impl_->opt.join);
  if (!impl_->opt.fault.empty()) impl_->lie = std::make_unique<LieFault>(impl_->opt.fault, impl_->opt.fault_seed);
  if (impl_->url.tls) impl_->tls = std::make_unique<TlsClient>(TlsClientOptions{impl_->opt.ca_file, impl_->opt.pinned_cert});
  else if (!impl_->opt.ca_file.empty())
    throw Error(ErrorCode::BadGraph, "--ca is for an https:// or wss:// coordinator; " + impl_->opt.join + " is plain");
}

Worker::~Worker() { stop(); }

int Worker::run() {
  Impl& w = *impl_;
  clean_model_cache(w.opt.cache_dir);
  for (const auto& path : w.opt.models) w.add_model(path);
  for (Lane* lane : {&w.steps, &w.graphs, &w.loads}) lane->thread = std::thread([&w, lane] { w.lane_loop(*lane); });
  const auto start = Clock::now();
  // Small first: a coordinator that restarts is rejoined within a second.
  constexpr double kFirstBackoff = 0.05, kMaxBackoff = 1.0;
  double backoff = kFirstBackoff;
  int status = 0;
  while (!w.stopping) {
    w.refused_retry = false;
    const bool connected = w.connect_once();
    if (w.refused || w.stopping) {
      status = w.refused ? 1 : 0;
      break;
    }
    if (!connected) {
      if (!w.opt.reconnect && std::chrono::duration<double>(Clock::now() - start).count() > w.opt.connect_timeout_s) {
        w.log("cannot reach " + w.url.base());
        status = 1;
        break;
      }
    } else {
      if (!w.opt.reconnect && !w.refused_retry) break;
      if (!w.refused_retry) backoff = kFirstBackoff;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.stopping = true;
    w.cv.notify_all();
  }
  for (Lane* lane : {&w.steps, &w.graphs, &w.loads})
    if (lane->thread.joinable()) lane->thread.join();
  return status;
}

void Worker::stop() {
  Impl& w = *impl_;
  std::lock_guard<std::mutex> lock(w.mu);
  w.stopping = true;
  w.cv.notify_all();
  if (w.link) w.link->close("the worker is stopping");
}

}  // namespace bonfire::net
