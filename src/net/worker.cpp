#include "net/worker.h"

#include <boost/asio/io_context.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

#include "core/bandwidth.h"
#include "core/error.h"
#include "net/dial.h"
#include "net/link.h"
#include "net/local_link.h"
#include "net/model_cache.h"
#include "net/model_hash.h"
#include "net/tls.h"
#include "net/url.h"
#include "net/worker_core.h"

namespace bonfire::net {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Measured once per process (about 30 ms: 64 MiB, past the caches, read
// three times by the worker's threads), for the hello's "device.readGBs".
double machine_read_gbs() {
  static const double gbs = measure_read_bandwidth(int64_t(64) << 20, 3) / 1e9;
  return gbs;
}

}  // namespace

int64_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

struct Worker::Impl {
  WorkerOptions opt;
  std::unique_ptr<WorkerCore> core;
  std::mutex mu;  // link
  std::atomic<bool> stopping{false};
  std::atomic<bool> refused{false};        // for good: exit
  std::atomic<bool> refused_retry{false};  // for now: try again
  std::shared_ptr<Link> link;
  Url url;
  std::unique_ptr<TlsClient> tls;  // for an https:// or wss:// coordinator

  bool connect_local();

  void log(const std::string& s) {
    if (!opt.quiet) std::cerr << "bonfire worker: " << s << std::endl;
  }

  WorkerCoreOptions core_options() const {
    WorkerCoreOptions c;
    c.token = opt.token;
    c.id = opt.id;
    c.coordinator = url.base();
    c.memory = opt.memory;
    c.disabled_features = opt.disabled_features;
    c.local_secret = opt.local_secret;
    // In process, a step runs on the thread that sends it (the coordinator's,
    // which waits for it anyway): no thread wakes between a step and the next.
    c.inline_steps = static_cast<bool>(opt.local_link);
    c.call_max_s = opt.call_max_s;
    c.session_ttl_s = opt.session_ttl_s;
    c.fetch_models = opt.fetch_models;
    c.quiet = opt.quiet;
    c.fault = opt.fault;
    c.fault_seed = opt.fault_seed;
    c.read_gbs = opt.read_gbs < 0 ? machine_read_gbs() : opt.read_gbs;
    return c;
  }

  WorkerCore::Hooks core_hooks() {
    WorkerCore::Hooks h;
    h.fetch_model = [this](const ModelFetch& f) { return fetch_model(f); };
    h.on_refused = [this](const std::string&, bool retry) {
      (retry ? refused_retry : refused) = true;
      std::lock_guard<std::mutex> lock(mu);
      if (link) link->close("refused");
    };
    h.log = [this](const std::string& s) { log(s); };
    return h;
  }

  // Into <cache>/<hash>/<model>/, each file checked against its SHA-256; a
  // failed download leaves nothing behind for the next try to trust.
  std::pair<std::string, ModelFingerprint> fetch_model(const ModelFetch& f) {
    const fs::path dir = fs::path(opt.cache_dir) / f.hash / f.model;
    std::error_code ec;
    const bool existed = fs::exists(dir, ec);
    try {
      int64_t missing = 0;
      for (const auto& file : f.files)
        if (!fs::exists(dir / file.name, ec)) missing += file.bytes;
      make_cache_room(opt.cache_dir, opt.cache_max, missing, dir, core->model_paths(),
                      [this](const std::string& s) { log(s); });
      fs::create_directories(dir);
      for (const auto& file : f.files) {
        const fs::path path = dir / file.name;
        if (fs::exists(path, ec) && sha256_file(path.string()) == file.sha256) continue;
        log("fetching " + f.model + "/" + file.name + " (" + std::to_string(file.bytes >> 20) + " MiB)");
        const std::string target =
            "/api/v3/models/" + percent_encode_segment(f.model) + "/files/" + percent_encode_segment(file.name);
        http_download(url, tls.get(), target, path.string(), file.bytes, opt.token);
        if (sha256_file(path.string()) != file.sha256)
          throw Error(ErrorCode::BadGraph, "model " + f.model + ": " + file.name + " does not match its SHA-256; removed");
      }
      fs::last_write_time(dir, fs::file_time_type::clock::now(), ec);
      return {dir.string(), fingerprint_model(dir.string())};
    } catch (...) {
      if (!existed) {
        fs::remove_all(dir, ec);
        if (fs::is_empty(dir.parent_path(), ec)) fs::remove(dir.parent_path(), ec);
      }
      throw;
    }
  }

  // One connection: returns when the link closes (false: it never opened;
  // `refused` set when it never will).
  bool connect_once() {
    if (opt.local_link) return connect_local();
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
    Link::Options lo;
    lo.max_frame_bytes = static_cast<uint64_t>(core->frame_max());
    lo.max_queue_bytes = static_cast<uint64_t>(std::max<int64_t>(opt.memory / 4, 64 << 20));
    auto l = std::visit([&](auto& s) { return std::make_shared<WsLink>(std::move(s), lo); }, *ws);
    {
      std::lock_guard<std::mutex> lock(mu);
      link = l;
    }
    core->link_opened([l](Message m) { l->send(m); });
    io.restart();
    l->start([this](Message m) { core->on_message(std::move(m)); },
             [this, &io](const std::string& why) {
               if (!stopping) log("link closed: " + why);
               io.stop();  // do not wait for the link's timers: reconnect now
             });
    l->send(core->hello());
    io.run();
    core->link_closed();
    std::lock_guard<std::mutex> lock(mu);
    link.reset();
    return true;
  }
};

// The in-process link of serve's own worker: what connect_once does over a
// WebSocket, without the socket. Messages to this worker run its handler on
// the sender's thread, so before the worker's objects may go, no delivery
// may still be running (wait_idle).
bool Worker::Impl::connect_local() {
  const std::shared_ptr<LocalLink> l = opt.local_link();
  struct Closed {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto closed = std::make_shared<Closed>();
  {
    std::lock_guard<std::mutex> lock(mu);
    link = l;
  }
  core->link_opened([l](Message m) { l->send(m); });
  l->start([this](Message m) { core->on_message(std::move(m)); },
           [this, closed](const std::string& why) {
             if (!stopping) log("link closed: " + why);
             std::lock_guard<std::mutex> lock(closed->mu);
             closed->done = true;
             closed->cv.notify_all();
           });
  if (stopping) l->close("the worker is stopping");
  l->send(core->hello());
  {
    std::unique_lock<std::mutex> lock(closed->mu);
    closed->cv.wait(lock, [&] { return closed->done; });
  }
  l->wait_idle();
  core->link_closed();
  std::lock_guard<std::mutex> lock(mu);
  link.reset();
  return true;
}

Worker::Worker(WorkerOptions options) : impl_(new Impl) {
  Impl& w = *impl_;
  w.opt = std::move(options);
  if (w.opt.memory <= 0) w.opt.memory = available_memory();
  if (w.opt.memory <= 0) w.opt.memory = int64_t(4) << 30;
  if (w.opt.cache_dir.empty()) {
    const char* home = getenv("HOME");
    w.opt.cache_dir = std::string(home ? home : "/tmp") + "/.cache/bonfire/models";
  }
  w.url = parse_join_url(w.opt.join);
  if (w.url.tls && !w.opt.local_link) w.tls = std::make_unique<TlsClient>(TlsClientOptions{w.opt.ca_file});
  else if (!w.opt.ca_file.empty())
    throw Error(ErrorCode::BadGraph, "--ca is for an https:// or wss:// coordinator; " + w.opt.join + " is plain");
}

Worker::~Worker() { stop(); }

int Worker::run() {
  Impl& w = *impl_;
  clean_model_cache(w.opt.cache_dir);
  w.core = std::make_unique<WorkerCore>(w.core_options(), w.core_hooks());
  for (const auto& path : w.opt.models) w.core->add_model(path, fingerprint_model(path));
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
  w.stopping = true;
  w.core.reset();  // joins the lanes
  return status;
}

void Worker::stop() {
  Impl& w = *impl_;
  w.stopping = true;
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.link) w.link->close("the worker is stopping");
}

}  // namespace bonfire::net
