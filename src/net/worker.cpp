#include "net/worker.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "core/error.h"
#include "core/threads.h"
#include "graph/executor.h"
#include "graph/session.h"
#include "graph/wire.h"
#include "ir/generation.h"
#include "net/link.h"
#include "net/model_hash.h"
#include "net/url.h"
#include "spec/manifest.h"

namespace bonfire::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
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

struct HeldModel {
  ModelFingerprint fingerprint;
  std::unique_ptr<ir::LocalModel> model;
};

}  // namespace

struct Worker::Impl {
  WorkerOptions opt;
  std::map<std::string, HeldModel> models;  // by id
  std::mutex models_mu;
  SessionStore sessions;
  std::map<std::string, Clock::time_point> last_used;  // executor thread only
  std::map<std::string, Call> registered;              // executor thread only
  std::deque<std::string> registered_order;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Message> queue;
  std::atomic<bool> busy{false};
  std::atomic<bool> stopping{false};
  std::atomic<bool> refused{false};
  std::shared_ptr<Link> link;
  asio::io_context* ioc = nullptr;
  std::string id;
  Url url;

  void log(const std::string& s) {
    if (!opt.quiet) std::cerr << "bonfire worker: " << s << std::endl;
  }

  std::set<std::string> features() const {
    std::set<std::string> f = implemented_features();
    for (const auto& d : opt.disabled_features) f.erase(d);
    return f;
  }

  int64_t session_bytes() {
    int64_t total = 0;
    for (const auto& [sid, t] : last_used)
      if (auto s = sessions.get(sid, false)) total += s->bytes();
    return total;
  }

  // What one call may create: the memory lent minus what sessions hold.
  Limits call_limits() {
    Limits l;
    l.max_total_bytes = std::max<int64_t>(0, std::min(l.max_total_bytes, opt.memory - session_bytes()));
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
    return {{"type", "hello"},
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
              {"maxTotalBytes", std::min(l.max_total_bytes, opt.memory)}}},
            {"threads", num_threads()},
            {"memory", opt.memory},
            {"fetch", opt.fetch_models},
            {"models", held}};
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

  // On the io thread: answer pings at once, queue the rest in order.
  void on_message(Message m) {
    const std::string type = m.type();
    if (type == "ping") {
      size_t queued;
      {
        std::lock_guard<std::mutex> lock(mu);
        queued = queue.size();
      }
      send(Message(json{{"type", "pong"},
                        {"t", m.header.value("t", 0.0)},
                        {"queue", queued + (busy ? 1 : 0)},
                        {"sessions", sessions.size()}}));
    } else if (type == "welcome") {
      id = m.header.value("id", "");
      log("joined " + url.base() + " as " + id);
    } else if (type == "refused") {
      log("refused by the coordinator: " + m.header.value("error", std::string("no reason given")));
      refused = true;
      if (link) link->close("refused");
    } else {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(m));
      cv.notify_one();
    }
  }

  void executor() {
    while (true) {
      Message m;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::seconds(5), [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        if (queue.empty()) {
          lock.unlock();
          expire_sessions();
          continue;
        }
        m = std::move(queue.front());
        queue.pop_front();
        busy = true;
      }
      handle(m);
      busy = false;
    }
  }

  void expire_sessions() {
    const auto now = Clock::now();
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
        last_used.erase(sid);
      } else if (type == "load_model") {
        load_model(m);
      } else {
        throw Error(ErrorCode::BadGraph, "unknown message type \"" + type + "\"");
      }
    } catch (const Error& e) {
      if (!req.is_null()) reply_error(req, e);
    } catch (const std::exception& e) {
      if (!req.is_null()) reply_error(req, Error(ErrorCode::Internal, e.what()));
    }
  }

  void run(Message& m) {
    const json& h = m.header;
    const auto t0 = Clock::now();
    std::map<std::string, Tensor> inputs, inline_weights;
    for (auto& [name, t] : m.tensors) {
      if (name.rfind("in:", 0) == 0) inputs[name.substr(3)] = std::move(t);
      else if (name.rfind("w:", 0) == 0) inline_weights[name.substr(2)] = std::move(t);
    }
    const Limits limits = call_limits();
    const std::string key = h.value("graph", "");
    const Call* call = nullptr;
    Call fresh;
    if (h.contains("call")) {
      json c = h["call"];
      if (h.contains("session") && c.is_object()) c["session"] = h["session"];
      fresh = Call::parse(c, limits, inputs, inline_weights);
      if (!key.empty()) {
        if (registered.size() >= kMaxRegistered) {
          registered.erase(registered_order.front());
          registered_order.pop_front();
        }
        registered[key] = fresh;
        registered_order.push_back(key);
        call = &registered[key];
      } else {
        call = &fresh;
      }
    } else {
      auto it = registered.find(key);
      if (it == registered.end())
        throw Error(ErrorCode::BadGraph, "graph \"" + key + "\" is not registered on this worker");
      call = &it->second;
    }
    require_features(call->graph, features());
    const std::string model_id = h.value("model", call->model);
    const ir::LocalModel* model = nullptr;
    if (!model_id.empty()) {
      std::lock_guard<std::mutex> lock(models_mu);
      auto it = models.find(model_id);
      if (it == models.end()) throw Error(ErrorCode::BadGraph, "this worker does not hold model \"" + model_id + "\"");
      model = it->second.model.get();
    }
    const std::map<std::string, Tensor>& weights = inline_weights.empty() ? call->weights : inline_weights;
    const WeightLookup lookup = [&](const std::string& name) -> const Tensor* {
      auto it = weights.find(name);
      if (it != weights.end()) return &it->second;
      return model ? model->weights().find(name) : nullptr;
    };
    std::shared_ptr<Session> session;
    const std::string sid = h.value("session", call->session);
    bool created = false;
    if (!sid.empty()) {
      session = sessions.get(sid, false);
      if (!session) {
        session = sessions.get(sid, true);
        created = true;
      }
      last_used[sid] = Clock::now();
    }
    const json bind = h.value("bind", call->bind);
    RunResult r;
    try {
      r = run_graph(call->graph, inputs.empty() ? call->inputs : inputs, bind, lookup, session.get(), limits);
    } catch (...) {
      // A refused call leaves no trace, not even an empty new session.
      if (created) {
        sessions.erase(sid);
        last_used.erase(sid);
      }
      throw;
    }
    Message out(json{{"type", "result"},
                     {"req", h["req"]},
                     {"ms", std::chrono::duration<double, std::milli>(Clock::now() - t0).count()}});
    out.tensors = std::move(r.outputs);
    send(std::move(out));
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
    fs::create_directories(dir);
    int64_t total = 0;
    for (const auto& f : h.at("files")) {
      const std::string name = f.at("name");
      const std::string sha = f.at("sha256");
      const int64_t bytes = f.at("bytes");
      if (!safe_name(name)) throw Error(ErrorCode::BadGraph, "load_model: bad file name \"" + name + "\"");
      total += bytes;
      if (total > opt.memory * 4)
        throw Error(ErrorCode::TooLarge, "model " + mid + " is larger than this worker accepts");
      const fs::path file = dir / name;
      if (fs::exists(file) && sha256_file(file.string()) == sha) continue;
      log("fetching " + mid + "/" + name + " (" + std::to_string(bytes >> 20) + " MiB)");
      http_download(url, "/api/v3/models/" + mid + "/files/" + name, file.string(), bytes, opt.token);
      if (sha256_file(file.string()) != sha) {
        fs::remove(file);
        throw Error(ErrorCode::BadGraph, "model " + mid + ": " + name + " does not match its SHA-256; removed");
      }
    }
    add_model(dir.string());
    send(Message(json{{"type", "result"}, {"req", h["req"]}, {"model", mid}, {"hash", hash}}));
  }

  void add_model(const std::string& path) {
    HeldModel held;
    held.fingerprint = fingerprint_model(path);
    held.model = ir::LocalModel::open(path, {});
    log("holds " + held.fingerprint.id + " (" + held.fingerprint.hash.substr(0, 12) + ")");
    std::lock_guard<std::mutex> lock(models_mu);
    models[held.fingerprint.id] = std::move(held);
  }

  // One connection: returns when the link closes.
  bool connect_once() {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::error_code ec;
    auto endpoints = resolver.resolve(url.host, url.port, ec);
    if (ec) return false;
    WsStream ws(io);
    beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(10));
    beast::get_lowest_layer(ws).connect(endpoints, ec);
    if (ec) return false;
    ws.handshake(url.host + ":" + url.port, url.path, ec);
    if (ec) {
      log("the coordinator at " + url.base() + " did not accept a WebSocket at " + url.path + ": " + ec.message());
      return false;
    }
    registered.clear();
    registered_order.clear();
    auto l = std::make_shared<Link>(std::move(ws), Limits{}, uint64_t(4) << 30, 20);
    {
      std::lock_guard<std::mutex> lock(mu);
      link = l;
      ioc = &io;
    }
    l->start([this](Message m) { on_message(std::move(m)); },
             [this](const std::string& why) {
               if (!stopping) log("link closed: " + why);
             });
    l->send(Message(hello()));
    io.run();
    std::lock_guard<std::mutex> lock(mu);
    link.reset();
    ioc = nullptr;
    queue.clear();
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
}

Worker::~Worker() { stop(); }

int Worker::run() {
  Impl& w = *impl_;
  for (const auto& path : w.opt.models) w.add_model(path);
  std::thread exec([&] { w.executor(); });
  const auto start = Clock::now();
  double backoff = 0.2;
  int status = 0;
  while (!w.stopping) {
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
      if (!w.opt.reconnect) break;
      backoff = 0.2;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
    backoff = std::min(backoff * 2, 5.0);
  }
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.stopping = true;
    w.cv.notify_all();
  }
  exec.join();
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
