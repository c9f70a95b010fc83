#include "net/coordinator.h"

#include <cstdio>

#include <boost/beast/websocket.hpp>
#include <chrono>

#include "core/error.h"
#include "graph/wire.h"
#include "net/model_hash.h"

namespace bonfire::net {

namespace beast = boost::beast;
namespace websocket = beast::websocket;

namespace {

constexpr int kProtocol = 3;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Compares secrets without leaking where they differ through timing.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

Error error_from_json(const json& e) {
  static const std::map<std::string, ErrorCode> codes = {
      {"bad_graph", ErrorCode::BadGraph},         {"unsupported_feature", ErrorCode::UnsupportedFeature},
      {"no_worker", ErrorCode::NoWorker},         {"session_not_found", ErrorCode::SessionNotFound},
      {"too_large", ErrorCode::TooLarge},         {"timeout", ErrorCode::Timeout},
      {"internal", ErrorCode::Internal}};
  if (!e.is_object()) return Error(ErrorCode::Internal, "the worker sent a malformed error");
  auto it = codes.find(e.value("code", "internal"));
  return Error(it == codes.end() ? ErrorCode::Internal : it->second, e.value("error", std::string("worker error")),
               e.value("node", ""), e.value("feature", ""));
}

}  // namespace

Message RemoteWorker::call(Message m, double timeout_s) {
  auto p = std::make_shared<Pending>();
  int64_t req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_reason_.empty())
      throw Error(ErrorCode::NoWorker, "worker " + info_.id + " is gone (" + closed_reason_ + ")");
    req = next_req_++;
    pending_[req] = p;
  }
  m.header["req"] = req;
  ++in_flight_;
  const auto t0 = std::chrono::steady_clock::now();
  link_->send(m);
  std::unique_lock<std::mutex> lock(p->mu);
  const bool done = p->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return p->done; });
  lock.unlock();
  --in_flight_;
  {
    std::lock_guard<std::mutex> g(mu_);
    pending_.erase(req);
  }
  if (!done) {
    // A worker that does not answer in time is no longer trusted with work.
    link_->close("no answer within " + std::to_string(static_cast<int>(timeout_s)) + " s");
    throw Error(ErrorCode::Timeout, "worker " + info_.id + " did not answer within " +
                                        std::to_string(static_cast<int>(timeout_s)) + " s");
  }
  if (!p->failure.empty()) throw Error(ErrorCode::NoWorker, "worker " + info_.id + " is gone (" + p->failure + ")");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> g(mu_);
    ewma_ms_ = ewma_ms_ == 0 ? ms : 0.8 * ewma_ms_ + 0.2 * ms;
  }
  ++calls_;
  if (p->reply.type() == "error") throw error_from_json(p->reply.header.value("error", json()));
  return std::move(p->reply);
}

void RemoteWorker::on_reply(Message m) {
  if (m.type() == "pong") return;
  const json req = m.header.value("req", json());
  if (!req.is_number_integer()) {
    link_->close("a reply without a request id");
    return;
  }
  std::shared_ptr<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(req.get<int64_t>());
    if (it == pending_.end()) return;  // answered after its caller gave up
    p = it->second;
  }
  std::lock_guard<std::mutex> lock(p->mu);
  p->reply = std::move(m);
  p->done = true;
  p->cv.notify_all();
}

void RemoteWorker::on_close(const std::string& reason) {
  std::map<int64_t, std::shared_ptr<Pending>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_reason_ = reason.empty() ? "closed" : reason;
    pending.swap(pending_);
  }
  for (auto& [r, p] : pending) {
    std::lock_guard<std::mutex> lock(p->mu);
    p->failure = closed_reason_;
    p->done = true;
    p->cv.notify_all();
  }
}

WorkerInfo RemoteWorker::info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_;
}

void RemoteWorker::add_model(const std::string& id, const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  info_.models[id] = hash;
}

double RemoteWorker::ms_per_call() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ewma_ms_;
}

bool RemoteWorker::has_graph(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return graphs_.count(key) > 0;
}

void RemoteWorker::note_graph(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (graphs_.size() >= 200) graphs_.clear();  // the worker keeps 256; resending is always safe
  graphs_.insert(key);
}

Coordinator::Coordinator(Options options)
    : options_(std::move(options)), guard_(boost::asio::make_work_guard(ioc_)) {
  thread_ = std::thread([this] { ioc_.run(); });
}

Coordinator::~Coordinator() {
  for (auto& w : workers()) w->close("the coordinator is stopping");
  guard_.reset();
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
}

void Coordinator::accept(boost::asio::ip::tcp::socket socket, HttpRequestRaw request) {
  auto ws = std::make_shared<WsStream>(std::move(socket));
  auto req = std::make_shared<HttpRequestRaw>(std::move(request));
  ws->async_accept(*req, [this, ws, req](beast::error_code ec) {
    if (ec) return;
    auto link = std::make_shared<Link>(std::move(*ws), Limits{}, options_.max_frame_bytes, options_.idle_timeout_s);
    auto slot = std::make_shared<std::shared_ptr<RemoteWorker>>();
    std::weak_ptr<Link> weak = link;
    link->start(
        [this, weak, slot](Message m) {
          auto l = weak.lock();
          if (!l) return;
          if (*slot) return (*slot)->on_reply(std::move(m));
          hello(l, m, slot);
        },
        [this, slot](const std::string& reason) {
          auto w = *slot;
          if (!w) return;
          w->on_close(reason);
          {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = workers_.find(w->info().id);
            if (it != workers_.end() && it->second == w) workers_.erase(it);
          }
          event("left", w->info().id, reason);
        });
    // A peer that never says hello is dropped.
    auto timer = std::make_shared<boost::asio::steady_timer>(ioc_, std::chrono::seconds(10));
    timer->async_wait([weak, slot, timer](beast::error_code) {
      if (auto l = weak.lock(); l && !*slot) l->close("no hello within 10 s");
    });
  });
}

void Coordinator::hello(std::shared_ptr<Link> link, const Message& m, std::shared_ptr<std::shared_ptr<RemoteWorker>> slot) {
  const json& h = m.header;
  auto refuse = [&](const std::string& why) {
    link->send(Message(json{{"type", "refused"}, {"error", why}}));
    link->close(why);
    event("refused", h.value("id", std::string()), why);
  };
  try {
    if (m.type() != "hello") return refuse("the first message must be a hello, not \"" + m.type() + "\"");
    if (h.value("protocol", 0) != kProtocol)
      return refuse("protocol " + h.value("protocol", json()).dump() + " is not this coordinator's (3)");
    if (!options_.token.empty() && !same_secret(h.value("token", std::string()), options_.token))
      return refuse("wrong or missing token (--token)");
    WorkerInfo info;
    info.remote = link->remote();
    for (const auto& o : h.at("ops")) info.ops.insert(o.get<std::string>());
    for (const auto& f : h.at("features")) info.features.insert(f.get<std::string>());
    info.limits = h.value("limits", json::object());
    info.threads = h.value("threads", 0);
    info.memory = h.value("memory", int64_t(0));
    info.fetch = h.value("fetch", false);
    info.joined = unix_now();
    for (const auto& mm : h.value("models", json::array())) info.models[mm.at("id")] = mm.at("hash");
    std::string id = h.value("id", std::string());
    if (!id.empty() && !safe_name(id)) return refuse("worker id \"" + id + "\" has characters ids may not have");
    std::shared_ptr<RemoteWorker> w;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!id.empty() && workers_.count(id)) {
        // The first keeps its sessions; the newcomer must pick another id.
        std::string why = "a worker with id \"" + id + "\" is already connected";
        link->send(Message(json{{"type", "refused"}, {"error", why}}));
        link->close(why);
        event("refused", id, why);
        return;
      }
      if (id.empty())
        do id = "w" + std::to_string(next_id_++);
        while (workers_.count(id));
      info.id = id;
      w = std::make_shared<RemoteWorker>(info, link);
      workers_[id] = w;
    }
    *slot = w;
    link->send(Message(json{{"type", "welcome"}, {"id", id}}));
    // One line that says what joined: where from and what it brings.
    char what[160];
    std::snprintf(what, sizeof what, "from %s: %lld threads, %.1f GiB, %zu ops, %zu features, %zu models",
                  info.remote.c_str(), static_cast<long long>(info.threads),
                  static_cast<double>(info.memory) / (1024.0 * 1024 * 1024), info.ops.size(), info.features.size(),
                  info.models.size());
    event("joined", id, what);
    if (on_join) std::thread([this, w] { on_join(w); }).detach();
  } catch (const json::exception& e) {
    refuse(std::string("malformed hello: ") + e.what());
  }
}

std::vector<std::shared_ptr<RemoteWorker>> Coordinator::workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<RemoteWorker>> out;
  for (const auto& [id, w] : workers_) out.push_back(w);
  return out;
}

std::shared_ptr<RemoteWorker> Coordinator::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : it->second;
}

std::shared_ptr<RemoteWorker> Coordinator::pick(const std::set<std::string>& ops, const std::set<std::string>& features,
                                                const std::string& model_hash,
                                                const std::set<std::string>& exclude) const {
  std::shared_ptr<RemoteWorker> best;
  double best_score = 0;
  std::set<std::string> network_features, network_ops;
  bool any = false;
  for (const auto& w : workers()) {
    if (!w->alive()) continue;
    const WorkerInfo info = w->info();
    any = true;
    network_features.insert(info.features.begin(), info.features.end());
    network_ops.insert(info.ops.begin(), info.ops.end());
    if (exclude.count(info.id)) continue;
    bool ok = true;
    for (const auto& o : ops) ok = ok && info.ops.count(o);
    for (const auto& f : features) ok = ok && info.features.count(f);
    if (!model_hash.empty()) {
      bool holds = false;
      for (const auto& [mid, h] : info.models) holds = holds || h == model_hash;
      ok = ok && holds;
    }
    if (!ok) continue;
    const double ms = w->ms_per_call() > 0 ? w->ms_per_call() : 10;
    const double score = (w->in_flight() + 1) * ms;
    if (!best || score < best_score) {
      best = w;
      best_score = score;
    }
  }
  if (best) return best;
  if (!any) throw Error(ErrorCode::NoWorker, "no worker is connected; start one with bonfire worker --join URL");
  for (const auto& f : features)
    if (!network_features.count(f))
      throw Error(ErrorCode::UnsupportedFeature,
                  "no connected worker implements the feature \"" + f + "\"", "", f);
  for (const auto& o : ops)
    if (!network_ops.count(o))
      throw Error(ErrorCode::UnsupportedFeature, "no connected worker implements the op \"" + o + "\"", "", o);
  if (!model_hash.empty())
    throw Error(ErrorCode::NoWorker, "no connected worker that can run this graph holds the model's files");
  throw Error(ErrorCode::NoWorker, "no connected worker can run this graph (every capable worker is excluded)");
}

}  // namespace bonfire::net
