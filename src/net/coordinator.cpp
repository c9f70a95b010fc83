#include "net/coordinator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <boost/asio/strand.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <type_traits>

#include "core/error.h"
#include "core/hop_trace.h"
#include "core/json_parse.h"
#include "graph/wire.h"
#include "net/local_link.h"
#include "net/worker_hello.h"
#include "net/model_hash.h"

namespace bonfire::net {

namespace beast = boost::beast;
namespace websocket = beast::websocket;

bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

namespace {

constexpr int kProtocol = 3;

// A worker's error as PROTOCOL.md writes errors; nullopt when it is not
// one (a field of the wrong type): a malformed reply, never an exception
// thrown at the coordinator.
std::optional<Error> error_from_json(const json& e) {
  static const std::map<std::string, ErrorCode> codes = {
      {"bad_graph", ErrorCode::BadGraph},         {"unsupported_feature", ErrorCode::UnsupportedFeature},
      {"no_worker", ErrorCode::NoWorker},         {"session_not_found", ErrorCode::SessionNotFound},
      {"too_large", ErrorCode::TooLarge},         {"timeout", ErrorCode::Timeout},
      {"internal", ErrorCode::Internal}};
  if (!e.is_object()) return std::nullopt;
  auto text = [&](const char* key, const std::string& dflt) -> std::optional<std::string> {
    auto it = e.find(key);
    if (it == e.end() || it->is_null()) return dflt;
    if (!it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  const auto code = text("code", "internal"), why = text("error", "worker error"), node = text("node", ""),
             feature = text("feature", "");
  if (!code || !why || !node || !feature) return std::nullopt;
  auto it = codes.find(*code);
  return Error(it == codes.end() ? ErrorCode::Internal : it->second, *why, *node, *feature);
}

}  // namespace

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Message RemoteWorker::call(Message m, double timeout_s, CallKind kind, const std::set<std::string>* expect) {
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
  m.header["timeoutMs"] = static_cast<int64_t>(timeout_s * 1000);
  const int64_t max_output = m.header.value("maxOutputBytes", int64_t(-1));
  ++in_flight_;
  const auto t0 = std::chrono::steady_clock::now();
  hop_trace("call.send");
  link_->send(m);
  std::unique_lock<std::mutex> lock(p->mu);
  const bool done = p->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return p->done; });
  hop_trace("call.woken");
  lock.unlock();
  --in_flight_;
  {
    std::lock_guard<std::mutex> g(mu_);
    pending_.erase(req);
    if (!done) {
      abandoned_.insert(req);
      if (abandoned_.size() > 1024) abandoned_.erase(abandoned_.begin());
    }
  }
  const std::string secs = std::to_string(static_cast<int>(timeout_s));
  if (!done) {
    // The worker stops the call at the same deadline. A step the
    // coordinator built should never take this long; a client's graph may,
    // so that only counts as the worker's time a call (the next graph goes
    // to a worker that answers).
    if (kind == CallKind::Step) strike("no answer to a step within " + secs + " s");
    {
      std::lock_guard<std::mutex> g(mu_);
      const double waited = timeout_s * 1000;
      ewma_ms_ = ewma_ms_ == 0 ? waited : 0.8 * ewma_ms_ + 0.2 * waited;
    }
    throw Error(ErrorCode::Timeout, "worker " + info_.id + " did not answer within " + secs + " s");
  }
  if (!p->failure.empty()) throw Error(ErrorCode::NoWorker, "worker " + info_.id + " is gone (" + p->failure + ")");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> g(mu_);
    ewma_ms_ = ewma_ms_ == 0 ? ms : 0.8 * ewma_ms_ + 0.2 * ms;
  }
  ++calls_;
  if (p->reply.type() == "error") {
    const std::optional<Error> sent = error_from_json(p->reply.header.value("error", json()));
    if (!sent) {
      strike("answered with a malformed error");
      throw Error(ErrorCode::NoWorker, "worker " + info_.id + " sent a malformed error");
    }
    const Error& e = *sent;
    // Out of memory or time is capacity, not a fault (a client could
    // otherwise get a worker dropped by asking for too much); any other error
    // to a graph the coordinator built and checked is the worker's.
    const bool capacity = e.code == ErrorCode::TooLarge || e.code == ErrorCode::Timeout;
    if ((kind == CallKind::Step && !capacity) || e.code == ErrorCode::Internal)
      strike(std::string("answered with an error: ") + e.what());
    throw e;
  }
  if (p->reply.type() != "result") {
    strike("answered with a \"" + p->reply.type() + "\" message");
    throw Error(ErrorCode::NoWorker, "worker " + info_.id + " sent a malformed reply");
  }
  // What the coordinator reads of a result's header (its time) has a type.
  if (const json& ms = p->reply.header.value("ms", json()); !ms.is_null() && !(ms.is_number() && std::isfinite(ms.get<double>()))) {
    strike("its result's \"ms\" is not a number");
    throw Error(ErrorCode::NoWorker, "worker " + info_.id + " sent a malformed reply");
  }
  int64_t bytes = 0;
  for (const auto& [name, t] : p->reply.tensors) {
    bytes += t.numel() * 4;
    if (expect && !expect->count(name)) {
      strike("its reply carries a tensor \"" + name.substr(0, 64) + "\" nobody asked for");
      throw Error(ErrorCode::NoWorker, "worker " + info_.id + " sent a tensor that was not asked for");
    }
  }
  if (expect)
    for (const auto& name : *expect)
      if (!p->reply.tensors.count(name)) {
        strike("its reply lacks \"" + name.substr(0, 64) + "\"");
        throw Error(ErrorCode::NoWorker, "worker " + info_.id + " left out an output it was asked for");
      }
  if (max_output >= 0 && bytes > max_output) {
    strike("its reply is larger than the call allows");
    throw Error(ErrorCode::NoWorker, "worker " + info_.id + " sent more bytes than the call allows");
  }
  strikes_ = 0;
  return std::move(p->reply);
}

void RemoteWorker::strike(const std::string& why) {
  const int n = ++strikes_;
  if (n >= kMaxStrikes)
    link_->close("dropped after " + std::to_string(n) + " wrong answers in a row (last: " + why + ")");
}

void RemoteWorker::unsolicited(const std::string& what) {
  int n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = ++unsolicited_;
  }
  if (n > kMaxUnsolicited)
    link_->close("dropped: over " + std::to_string(kMaxUnsolicited) + " frames that answer nothing (last: " + what + ")");
}

void RemoteWorker::on_reply(Message m) {
  hop_trace("call.reply_in");
  // docs/NETWORK.md: either side may ask if the other is alive.
  if (m.type() == "ping") {
    const json t = m.header.value("t", json(0.0));
    return link_->send(Message(json{{"type", "pong"}, {"t", t.is_number() ? t : json(0.0)}}));
  }
  if (m.type() == "pong") return;
  const json req = m.header.value("req", json());
  if (!req.is_number_integer()) return unsolicited("a \"" + m.type().substr(0, 32) + "\" without a request id");
  std::shared_ptr<Pending> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(req.get<int64_t>());
    if (it == pending_.end()) {
      // Answered after its caller gave up: expected once per abandoned call.
      if (abandoned_.erase(req.get<int64_t>())) return;
    } else {
      p = it->second;
      pending_.erase(it);  // one answer per request
    }
  }
  if (!p) return unsolicited("an answer to request " + req.dump() + ", which is not waiting");
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

void RemoteWorker::note_check(CheckResult r) {
  (r == CheckResult::Passed ? checks_passed_ : r == CheckResult::Failed ? checks_failed_ : checks_inconclusive_) += 1;
}

bool RemoteWorker::trusted() const {
  return info_.local || (checks_passed_ >= kTrustedAfter && checks_failed_ == 0);
}

json RemoteWorker::checks() const {
  return {{"passed", checks_passed_.load()},
          {"failed", checks_failed_.load()},
          {"inconclusive", checks_inconclusive_.load()},
          {"trusted", trusted()}};
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

void RemoteWorker::note_speed(int64_t bytes, double ms) {
  if (bytes <= 0 || !(ms > 0)) return;
  const double gbs = static_cast<double>(bytes) / (ms * 1e6);
  std::lock_guard<std::mutex> lock(mu_);
  speed_gbs_ = speed_samples_++ == 0 ? gbs : 0.8 * speed_gbs_ + 0.2 * gbs;
}

double RemoteWorker::measured_gbs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return speed_samples_ >= kSpeedSamples ? speed_gbs_ : 0;
}

json RemoteWorker::speed() const {
  int64_t samples;
  {
    std::lock_guard<std::mutex> lock(mu_);
    samples = speed_samples_;
  }
  return {{"measuredGBs", std::round(measured_gbs() * 1000) / 1000},
          {"samples", samples},
          {"announcedGBs", announced_gbs()}};
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
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
}

Coordinator::~Coordinator() {
  shutdown();
  guard_.reset();
  ioc_.stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void Coordinator::shutdown() {
  std::vector<std::shared_ptr<Link>> links;
  std::vector<std::thread> joins;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_ = true;
    for (auto& w : links_)
      if (auto l = w.lock()) links.push_back(l);
    links_.clear();
    joins.swap(join_threads_);
  }
  for (auto& l : links) l->close("the coordinator is stopping");
  // An on_join thread waits on calls to its worker, which the closes end.
  for (auto& t : joins)
    if (t.joinable()) t.join();
}

void Coordinator::accept(ServerStream stream, HttpRequestRaw request, std::shared_ptr<void> slot) {
  // The stream is on a strand of its own (the HTTP server made it so): the
  // link's handlers never run at once, and different links run on
  // different I/O threads.
  auto req = std::make_shared<HttpRequestRaw>(std::move(request));
  Link::Options lo;
  lo.max_frame_bytes = options_.hello_max_bytes;  // raised by the welcome
  lo.idle_timeout_s = options_.idle_timeout_s;
  std::visit(
      [&](auto& s) {
        using Ws = websocket::stream<std::decay_t<decltype(s)>>;
        auto ws = std::make_shared<Ws>(std::move(s));
        ws->async_accept(*req, [this, ws, req, lo, slot](beast::error_code ec) {
          if (!ec) attach(std::make_shared<WsLink>(std::move(*ws), lo, slot));
        });
      },
      stream);
}

std::shared_ptr<LocalLink> Coordinator::connect_local() {
  auto [mine, theirs] = make_local_link(ioc_.get_executor());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_) {
      mine->close("the coordinator is stopping");
      return theirs;
    }
  }
  attach(mine);
  return theirs;
}

void Coordinator::attach(std::shared_ptr<Link> link) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_) return;  // the link's destructor closes the socket
    std::erase_if(links_, [](const std::weak_ptr<Link>& w) { return w.expired(); });
    links_.push_back(link);
  }
  auto timer = std::make_shared<boost::asio::steady_timer>(link->executor(), std::chrono::seconds(10));
  auto worker = std::make_shared<std::shared_ptr<RemoteWorker>>();
  std::weak_ptr<Link> weak = link;
  link->start(
      [this, weak, worker](Message m) {
        auto l = weak.lock();
        if (!l) return;
        if (*worker) return (*worker)->on_reply(std::move(m));
        hello(l, m, worker);
      },
      [this, worker](const std::string& reason) {
        auto w = *worker;
        if (!w) return;
        w->on_close(reason);
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = workers_.find(w->id());
          if (it != workers_.end() && it->second == w) workers_.erase(it);
        }
        event(reason.rfind("dropped", 0) == 0 ? "dropped" : "left", w->id(), reason);
      });
  // A peer that never says hello is dropped. The timer runs on the link's
  // strand, as the hello does.
  timer->async_wait([weak, worker, timer](beast::error_code) {
    if (auto l = weak.lock(); l && !*worker) l->close("no hello within 10 s");
  });
}

namespace {

bool loopback(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1" || address.rfind("::ffff:127.", 0) == 0;
}

}  // namespace

const Coordinator::Ban* Coordinator::banned(const std::string& id, const std::string& address) const {
  const auto now = std::chrono::steady_clock::now();
  for (const Ban& b : bans_)
    if (b.until > now && ((!id.empty() && b.id == id) || (!address.empty() && b.address == address))) return &b;
  return nullptr;
}

bool Coordinator::ban(RemoteWorker& w, double seconds, const std::string& reason) {
  const WorkerInfo info = w.info();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    bans_.erase(std::remove_if(bans_.begin(), bans_.end(), [&](const Ban& b) { return b.until <= now; }), bans_.end());
    if (banned(info.id, "")) return false;  // found out twice (checks still running): the first ban stands
    Ban b;
    b.id = info.id;
    if (!loopback(info.address) && !options_.never_ban.count(info.address)) b.address = info.address;
    b.reason = reason;
    b.steps = w.steps();
    b.until = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    bans_.push_back(b);
  }
  event("banned", info.id, reason + " (after " + std::to_string(w.steps()) + " steps)");
  w.close("banned: " + reason);
  return true;
}

json Coordinator::bans() const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  json out = json::array();
  for (const Ban& b : bans_)
    if (b.until > now)
      out.push_back({{"id", b.id},
                     {"address", b.address},
                     {"reason", b.reason},
                     {"steps", b.steps},
                     {"secondsLeft", std::chrono::duration<double>(b.until - now).count()}});
  return out;
}

void Coordinator::hello(std::shared_ptr<Link> link, const Message& m, std::shared_ptr<std::shared_ptr<RemoteWorker>> slot) {
  const json& h = m.header;
  const std::string claimed = h.contains("id") && h["id"].is_string() ? h["id"].get<std::string>() : "";
  auto refuse = [&](const std::string& why, bool retry = false) {
    link->send(Message(json{{"type", "refused"}, {"error", why}, {"retry", retry}}));
    link->close(why);
    event("refused", safe_name(claimed) ? claimed : "?", why);
  };
  try {
    if (m.type() != "hello") return refuse("the first message must be a hello, not \"" + m.type().substr(0, 32) + "\"");
    if (!h.value("protocol", json()).is_number_integer() || h["protocol"].get<int64_t>() != kProtocol)
      return refuse("protocol " + h.value("protocol", json()).dump().substr(0, 32) + " is not this coordinator's (3)");
    if (!options_.token.empty() && !same_secret(h.value("token", std::string()), options_.token))
      return refuse("wrong or missing token (--token)");
    // The id "local" routes every generation of a default coordinator: only
    // the process's own worker, which knows the secret, may take it.
    const bool local = !options_.local_secret.empty() &&
                       same_secret(h.value("localSecret", std::string()), options_.local_secret);
    if (claimed == "local" && !local) return refuse("the worker id \"local\" is reserved for the coordinator's own worker");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (const Ban* b = banned(claimed, link->remote_address())) {
        const auto left = std::chrono::duration_cast<std::chrono::seconds>(b->until - std::chrono::steady_clock::now());
        return refuse("banned for another " + std::to_string(left.count()) + " s: " + b->reason);
      }
    }
    WorkerInfo info;
    info.remote = link->remote();
    info.address = link->remote_address();
    info.local = local;
    if (const std::string why = read_hello(h, info); !why.empty()) return refuse(why);
    info.joined = unix_now();
    std::string id = claimed;
    if (!id.empty() && !safe_name(id)) return refuse("the worker id has characters ids may not have");
    std::shared_ptr<RemoteWorker> w, replaced;
    bool duplicate = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shut_) return refuse("the coordinator is stopping", true);
      if (!id.empty() && workers_.count(id)) {
        if (local) {
          // The real local worker back before its old link was noticed gone.
          replaced = workers_[id];
        } else {
          duplicate = true;
        }
      }
      if (!duplicate) {
        if (id.empty())
          do id = "w" + std::to_string(next_id_++);
          while (workers_.count(id));
        info.id = id;
        w = std::make_shared<RemoteWorker>(info, link);
        workers_[id] = w;
      }
    }
    // The first keeps its sessions; the newcomer may try again later (the
    // first may be a link about to be found dead).
    if (duplicate) return refuse("a worker with id \"" + id + "\" is already connected", true);
    if (replaced) replaced->close("replaced by a new link of the same worker");
    *slot = w;
    link->set_max_frame(options_.max_frame_bytes);
    link->send(Message(json{{"type", "welcome"}, {"id", id}, {"maxFrameBytes", options_.max_frame_bytes}}));
    // One line that says what joined: where from and what it brings.
    char what[160];
    std::snprintf(what, sizeof what, "from %s: %lld threads, %.1f GiB, %zu ops, %zu features, %zu models",
                  info.remote.c_str(), static_cast<long long>(info.threads),
                  static_cast<double>(info.memory) / (1024.0 * 1024 * 1024), info.ops.size(), info.features.size(),
                  info.models.size());
    event("joined", id, what);
    if (on_join) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!shut_) join_threads_.emplace_back([this, w] { on_join(w); });
    }
  } catch (const json::exception& e) {
    refuse(std::string("malformed hello: ") + json_error_text(e));
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
