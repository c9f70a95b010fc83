#include "net/server.h"

#include <csignal>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>
#include <tuple>

#include "core/error.h"
#include "core/json_parse.h"
#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/wire.h"
#include "net/openai.h"
#include "spec/manifest.h"

namespace bonfire::net {

namespace {

std::atomic<bool> g_signalled{false};
void on_signal(int) { g_signalled = true; }

// 32 random bytes as hex, from the system's entropy source.
std::string random_secret() {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < 8; ++i) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
    s += buf;
  }
  return s;
}


int64_t steady_ms(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// "w1:0-11" (GenerationTrace::stage_workers) -> worker, first, end.
bool parse_stage(const std::string& s, std::string& worker, int64_t& first, int64_t& end) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  const size_t dash = s.find('-', colon);
  if (dash == std::string::npos) return false;
  try {
    first = std::stoll(s.substr(colon + 1, dash - colon - 1));
    end = std::stoll(s.substr(dash + 1));
  } catch (const std::exception&) {
    return false;
  }
  worker = s.substr(0, colon);
  return true;
}

}  // namespace

Server::Server(ServeOptions options) : options_(std::move(options)) {
  // First: a wrong certificate or key path should not wait for the models.
  if (options_.tls_cert.empty() != options_.tls_key.empty())
    throw Error(ErrorCode::BadGraph, "--tls-cert and --tls-key go together: give both, or neither for plain HTTP");
  std::shared_ptr<boost::asio::ssl::context> tls;
  if (!options_.tls_cert.empty()) tls = tls_server_context(options_.tls_cert, options_.tls_key);
  if (options_.web_dir.empty()) options_.web_dir = find_web_dir(options_.source_web_dir);
  log(options_.web_dir.empty() ? std::string("no web page found (GET / shows a placeholder; see --web-dir)")
                               : "web page from " + options_.web_dir);
  const std::string wasm = options_.wasm_dir.empty() ? find_wasm_dir() : options_.wasm_dir;
  log(wasm.empty() ? std::string("no browser worker build found (GET /lend cannot lend a tab until "
                                 "scripts/build_wasm.sh has run; see --wasm-dir)")
                   : "browser worker from " + wasm);
  for (const auto& path : options_.models) {
    auto m = ServedModel::open(path, options_.model);
    for (const auto& other : models_)
      if (other->id() == m->id())
        throw Error(ErrorCode::BadGraph, "two models are named \"" + m->id() + "\"; serve them from folders with distinct names");
    log("serving " + m->id() + " (" + std::to_string(m->n_layers()) + " layers, " +
        std::to_string(m->total_bytes() >> 20) + " MiB with a " + std::to_string(m->local().ctx()) +
        "-token context)");
    models_.push_back(std::move(m));
  }
  Coordinator::Options co;
  co.token = options_.token;
  // The built-in worker proves it is this process's own with a secret no
  // one else sees, so no peer can take its id (and its generations).
  if (options_.local_worker) local_secret_ = random_secret();
  co.local_secret = local_secret_;
  co.never_ban = options_.never_ban;
  net_ = std::make_unique<Coordinator>(co);
  VerifyOptions vo = options_.verify;
  vo.call_timeout_s = options_.model.call_timeout_s;
  verifier_ = std::make_unique<Verifier>(*net_, vo);
  net_->on_event = [this](const std::string& event, const std::string& worker, const std::string& detail) {
    metrics_.count_worker_event(event);
    log("worker " + worker + " " + event + (detail.empty() ? "" : ": " + detail));
  };
  net_->on_join = [this](std::shared_ptr<RemoteWorker> w) { offer_models(std::move(w)); };
  HttpServer::Options ho;
  ho.host = options_.host;
  ho.port = options_.port;
  ho.max_body = options_.max_body;
  ho.tls = tls;
  ho.log = [this](const std::string& s) { log(s); };
  // Refused before routing, but still in the shape the path's clients read,
  // and counted under the endpoint it was meant for.
  ho.refuse = [this](const HttpRequest& partial, int status, const std::string& code, const std::string& why,
                     HttpResponder& r) {
    const std::string& path = partial.path;
    if (const std::string origin = cors_origin(partial); !origin.empty()) allow_origin(r, origin);
    r.send_json(status, path.rfind("/v1/", 0) == 0 ? openai_error(why, code, status)
                                                   : nlohmann::json{{"error", why}, {"code", code}});
    metrics_.count_request(endpoint_label(path), status);
  };
  http_ = std::make_unique<HttpServer>(
      net_->io(), ho, [this](const HttpRequest& req, HttpResponder& res) { handle(req, res); },
      [this](ServerStream s, HttpRequestRaw r, std::shared_ptr<void> slot) {
        net_->accept(std::move(s), std::move(r), std::move(slot));
      });
}

Server::~Server() { stop(); }

void Server::start() {
  http_->start();
  const bool tls = !options_.tls_cert.empty();
  const std::string scheme = tls ? "https://" : "http://";
  log("listening on " + scheme + options_.host + ":" + std::to_string(port()));
  if (options_.local_worker) {
    WorkerOptions wo;
    wo.join = scheme + "127.0.0.1:" + std::to_string(port());
    if (options_.host != "0.0.0.0" && options_.host != "::") wo.join = scheme + options_.host + ":" + std::to_string(port());
    wo.models = options_.models;
    wo.token = options_.token;
    wo.id = "local";
    wo.local_secret = local_secret_;
    wo.memory = options_.local_worker_memory;
    wo.quiet = options_.quiet;
    wo.fetch_models = false;  // it reads the same files from disk
    // In this process: no socket between the two (local_link.h).
    wo.local_link = [this] { return net_->connect_local(); };
    local_worker_ = std::make_unique<Worker>(wo);
    local_thread_ = std::thread([this] { local_worker_->run(); });
  }
}

void Server::stop() {
  // Order matters: links closed first make every call in flight fail at
  // once, so the HTTP handlers waiting on them end, and the threads that
  // offer models to joining workers are joined before the models go.
  if (local_worker_) local_worker_->stop();
  if (net_) net_->shutdown();
  if (local_thread_.joinable()) local_thread_.join();
  local_worker_.reset();
  if (http_) http_->stop();
  verifier_.reset();  // its checks use the models
}

int Server::run() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  start();
  while (!g_signalled) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  log("stopping");
  stop();
  return 0;
}

void Server::log(const std::string& s) const {
  if (!options_.quiet) std::cerr << "bonfire serve: " << s << std::endl;
}

ServedModel* Server::model_for(const std::string& id) {
  if (id.empty()) {
    if (models_.size() == 1) return models_[0].get();
    throw Error(ErrorCode::BadGraph, models_.empty() ? "this coordinator serves no model (start it with --model PATH)"
                                                     : "name the \"model\": this coordinator serves several");
  }
  for (auto& m : models_)
    if (m->id() == id) return m.get();
  throw Error(ErrorCode::BadGraph, "no model \"" + id + "\" is served here; GET /api/v3/models lists them");
}

void Server::graph(const HttpRequest& req, HttpResponder& res) {
  const nlohmann::json j = parse_json(req.body, "the request body");
  // Parsed here first: a bad graph is refused without bothering a worker.
  Call call = Call::parse(j, options_.graph_limits);
  std::set<std::string> ops;
  for (const auto& n : call.graph.nodes) ops.insert(n.op->name);
  std::string hash;
  if (!call.model.empty()) {
    for (const auto& mm : models_)
      if (mm->id() == call.model) hash = mm->fingerprint().hash;
    if (hash.empty())
      for (const auto& w : net_->workers())
        for (const auto& [mid, h] : w->info().models)
          if (mid == call.model) hash = h;
    if (hash.empty()) throw Error(ErrorCode::NoWorker, "no connected worker holds model \"" + call.model + "\"");
  }
  std::shared_ptr<RemoteWorker> w;
  if (!call.session.empty()) {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    auto it = session_worker_.find(call.session);
    if (it != session_worker_.end()) {
      w = net_->find(it->second);
      if (!w || !w->alive()) {
        session_worker_.erase(it);
        throw Error(ErrorCode::SessionNotFound,
                    "session \"" + call.session + "\" lived on a worker that has left; start it again");
      }
      // The session's worker must be able to run this call too.
      require_features(call.graph, w->info().features);
    }
  }
  if (!w) {
    try {
      w = net_->pick(ops, call.graph.features, hash);
    } catch (Error& e) {  // name the node that needs what no worker has
      if (e.code == ErrorCode::UnsupportedFeature && e.node.empty() && call.graph.first_user.count(e.feature))
        e.node = call.graph.first_user.at(e.feature);
      throw;
    }
  }
  nlohmann::json wire = j;
  wire.erase("inputs");
  wire.erase("weights");
  wire.erase("encoding");
  // The answer is refused before it runs when it could not be sent: JSON
  // numbers cost ~12x the tensor in memory, base64 1.4x.
  const int64_t max_output = call.b64 ? options_.max_b64_output_bytes : options_.max_json_output_bytes;
  // "lane": a worker runs client graphs beside, never ahead of, generations' steps.
  Message msg(nlohmann::json{{"type", "run"}, {"call", wire}, {"maxOutputBytes", max_output}, {"lane", "graph"}});
  for (const auto& [k, t] : call.inputs) msg.tensors["in:" + k] = t;
  for (const auto& [k, t] : call.weights) msg.tensors["w:" + k] = t;
  std::set<std::string> expect;
  for (const auto& o : call.graph.outputs) expect.insert(o.text());
  Message reply;
  try {
    reply = w->call(std::move(msg), options_.graph_timeout_s, CallKind::ClientGraph, &expect);
  } catch (const Error& e) {
    if (e.code == ErrorCode::TooLarge && !call.b64 && std::string(e.what()).find(kOverOutputBytes) != std::string::npos)
      throw Error(e.code, std::string(e.what()) + " as JSON; with \"encoding\": \"b64\" it may carry " +
                              std::to_string(options_.max_b64_output_bytes) + " bytes", e.node);
    throw;
  }
  if (!call.session.empty()) {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    session_worker_[call.session] = w->info().id;
  }
  nlohmann::json outputs = nlohmann::json::object();
  for (const auto& [k, t] : reply.tensors) outputs[k] = tensor_to_json(t, call.b64);
  res.send_json(200, {{"outputs", outputs}, {"worker", w->info().id}, {"ms", reply.header.value("ms", 0.0)}});
}

void Server::free_session(const std::string& id, HttpResponder& res) {
  std::shared_ptr<RemoteWorker> w;
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    auto it = session_worker_.find(id);
    if (it == session_worker_.end())
      throw Error(ErrorCode::SessionNotFound, "no session \"" + id + "\" (never created, already freed, or expired)");
    w = net_->find(it->second);
    session_worker_.erase(it);
  }
  if (w && w->alive()) w->send(Message(nlohmann::json{{"type", "free"}, {"session", id}, {"lane", "graph"}}));
  res.send_json(200, {{"freed", id}});
}

nlohmann::json Server::workers_json() const {
  // Stages of the generations running now, per worker: (model, first, end) -> generations.
  std::map<std::string, std::map<std::tuple<std::string, int64_t, int64_t>, int>> stages;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    for (const auto& [gid, g] : live_)
      for (const auto& st : g.stages) {
        std::string wid;
        int64_t first = 0, end = 0;
        if (parse_stage(st, wid, first, end)) ++stages[wid][{g.model, first, end}];
      }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : net_->workers()) {
    const WorkerInfo i = w->info();
    nlohmann::json models = nlohmann::json::array();
    for (const auto& [mid, h] : i.models) models.push_back({{"id", mid}, {"hash", h}});
    out.push_back({{"id", i.id},
                   {"remote", i.remote},
                   {"ops", i.ops},
                   {"features", i.features},
                   {"limits", i.limits},
                   {"threads", i.threads},
                   {"simd", i.simd},
                   {"int8Rows", i.int8_rows},
                   {"kind", i.kind},
                   {"device", i.device},
                   {"background", i.background},
                   {"memory", i.memory},
                   {"models", models},
                   {"load", {{"inFlight", w->in_flight()}, {"msPerCall", w->ms_per_call()}, {"calls", w->calls()}, {"steps", w->steps()}}},
                   {"speed", w->speed()},
                   {"joined", i.joined}});
    nlohmann::json held = nlohmann::json::array();
    int generations = 0;
    if (auto it = stages.find(i.id); it != stages.end())
      for (const auto& [key, n] : it->second) {
        held.push_back({{"model", std::get<0>(key)}, {"first", std::get<1>(key)}, {"end", std::get<2>(key)},
                        {"generations", n}});
        generations += n;
      }
    out.back()["stages"] = held;
    out.back()["generations"] = generations;
    nlohmann::json batching = nlohmann::json::array();
    for (const auto& m : models_)
      for (auto& st : m->scheduler().stats())
        if (st["worker"] == i.id) {
          st.erase("worker");
          batching.push_back(std::move(st));
        }
    out.back()["batching"] = batching;
    out.back()["sessions"] = {{"reserved", net_->sessions().reserved(i.id)},
                              {"budget", SessionLedger::session_budget(i.memory)}};
    out.back()["checks"] = w->checks();
  }
  return {{"workers", out}, {"bans", net_->bans()}, {"verifier", verifier_->stats()}};
}

nlohmann::json Server::models_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : models_) {
    nlohmann::json d = m->describe();
    nlohmann::json holders = nlohmann::json::array();
    for (const auto& w : net_->workers())
      for (const auto& [mid, h] : w->info().models)
        if (h == m->fingerprint().hash) holders.push_back(w->info().id);
    d["workers"] = holders;
    if (!d.contains("family")) d["family"] = m->local().ir().value("family_hint", "");
    int generations = 0;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      for (const auto& [gid, g] : live_) generations += g.model == m->id();
    }
    d["generations"] = generations;
    out.push_back(d);
  }
  return {{"models", out}};
}

void Server::model_file(const std::string& model, const std::string& file, HttpResponder& res) {
  ServedModel* m = model_for(model);
  for (const auto& f : m->fingerprint().files) {
    if (f.name != file) continue;
    std::ifstream in(f.path, std::ios::binary);
    if (!in) throw Error(ErrorCode::Internal, "cannot read " + f.name);
    if (!res.start_stream("application/octet-stream")) return;
    std::string buf(1 << 20, '\0');
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (in.gcount() > 0 && !res.write(buf.substr(0, static_cast<size_t>(in.gcount())))) return;
    }
    return res.end_stream();
  }
  throw Error(ErrorCode::BadGraph, "model " + model + " has no file \"" + file + "\"");
}

// Offers a joining worker the models it lacks, when it accepts downloads and
// lends enough memory for one.
void Server::offer_models(std::shared_ptr<RemoteWorker> w) {
  const WorkerInfo info = w->info();
  if (!info.fetch) return;
  for (const auto& m : models_) {
    bool held = false;
    for (const auto& [mid, h] : info.models) held = held || h == m->fingerprint().hash;
    if (held) continue;
    if (info.memory < m->total_bytes()) {
      // Said, so a volunteer whose worker sits idle can learn why.
      log("worker " + info.id + " lends " + std::to_string(info.memory >> 20) + " MiB, less than " + m->id() +
          " needs (" + std::to_string(m->total_bytes() >> 20) + " MiB): not offered");
      continue;
    }
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : m->fingerprint().files) files.push_back({{"name", f.name}, {"sha256", f.sha256}, {"bytes", f.bytes}});
    try {
      w->call(Message(nlohmann::json{{"type", "load_model"}, {"model", m->id()}, {"hash", m->fingerprint().hash}, {"files", files}}),
              3600, CallKind::Control);
      w->add_model(m->id(), m->fingerprint().hash);
      log("worker " + info.id + " fetched " + m->id());
    } catch (const Error& e) {
      log("worker " + info.id + " could not fetch " + m->id() + ": " + e.what());
    }
  }
}

std::string Server::metrics_text() const {
  std::vector<Metrics::Gauge> gauges;
  Metrics::Gauge workers{"bonfire_workers", "connected workers", {{"", static_cast<double>(net_->workers().size())}}};
  Metrics::Gauge inflight{"bonfire_worker_calls_in_flight", "calls sent to a worker and not yet answered", {}};
  Metrics::Gauge speed{"bonfire_worker_ms_per_call", "moving average of a worker's time per call", {}};
  double queue = 0;
  for (const auto& w : net_->workers()) {
    const std::string label = prom_label("worker", w->info().id);
    inflight.values.push_back({label, static_cast<double>(w->in_flight())});
    speed.values.push_back({label, w->ms_per_call()});
    queue += w->in_flight();
  }
  gauges.push_back(workers);
  gauges.push_back({"bonfire_queue_depth", "calls in flight over all workers", {{"", queue}}});
  gauges.push_back({"bonfire_active_generations", "generations running now", {{"", static_cast<double>(active_generations_)}}});
  gauges.push_back({"bonfire_generations_waiting_for_memory",
                    "generations waiting for a worker to have room for their sessions",
                    {{"", static_cast<double>(net_->sessions().waiting())}}});
  Metrics::Gauge reserved{"bonfire_worker_session_bytes", "session memory generations have reserved on a worker", {}};
  for (const auto& w : net_->workers())
    reserved.values.push_back(
        {prom_label("worker", w->info().id), static_cast<double>(net_->sessions().reserved(w->info().id))});
  gauges.push_back(reserved);
  gauges.push_back(inflight);
  gauges.push_back(speed);
  // Continuous batching, per stage (worker, model, layers): the sequences
  // decoding there, the steps waiting for a call, the last batch's rows and
  // the mean rows per batched call so far.
  Metrics::Gauge sequences{"bonfire_batch_sequences", "sequences decoding on a stage", {}};
  Metrics::Gauge queued{"bonfire_batch_queue", "steps waiting for a call on a stage (the queue beyond the running batch)", {}};
  Metrics::Gauge last{"bonfire_batch_rows", "rows in a stage's last batched call", {}};
  Metrics::Gauge occupancy{"bonfire_batch_occupancy", "mean rows per batched call on a stage", {}};
  for (const auto& m : models_)
    for (const auto& st : m->scheduler().stats()) {
      const std::string label = prom_label("worker", st["worker"]) + "," + prom_label("model", st["model"]) + "," +
                                prom_label("layers", st["layers"]);
      sequences.values.push_back({label, st["sequences"].get<double>()});
      queued.values.push_back({label, st["queued"].get<double>()});
      last.values.push_back({label, st["lastBatch"].get<double>()});
      const double batches = st["batches"].get<double>();
      occupancy.values.push_back({label, batches > 0 ? st["rows"].get<double>() / batches : 0.0});
    }
  for (auto* g : {&sequences, &queued, &last, &occupancy}) gauges.push_back(*g);
  // Spot checks (net/verifier.h): counts since start, by outcome.
  const nlohmann::json v = verifier_->stats();
  Metrics::Gauge checks{"bonfire_verify_checks_total", "spot checks of workers since start, by outcome", {}, "counter"};
  for (const char* r : {"passed", "failed", "inconclusive", "skipped"})
    checks.values.push_back({prom_label("result", r), v[r].get<double>()});
  gauges.push_back(checks);
  gauges.push_back({"bonfire_verify_bans_total", "workers banned after a failed check since start",
                    {{"", v["banned"].get<double>()}}, "counter"});
  return metrics_.render(gauges);
}

// ---- the live view ----

Server::LiveScope::LiveScope(Server& s, const std::string& model, int64_t prompt_tokens) : s_(s) {
  std::lock_guard<std::mutex> lock(s_.live_mu_);
  id_ = s_.live_next_++;
  LiveGeneration& g = s_.live_[id_];
  g.model = model;
  g.prompt_tokens = prompt_tokens;
  g.started = std::chrono::steady_clock::now();
  s_.live_prompt_tokens_ += prompt_tokens;
}

Server::LiveScope::~LiveScope() {
  std::lock_guard<std::mutex> lock(s_.live_mu_);
  s_.live_.erase(id_);
}

void Server::LiveScope::token(const GenerationTrace& trace) {
  const int64_t slot = steady_ms(std::chrono::steady_clock::now()) / kRateBucketMs;
  std::lock_guard<std::mutex> lock(s_.live_mu_);
  LiveGeneration& g = s_.live_[id_];
  ++g.tokens;
  if (g.stages != trace.stage_workers) g.stages = trace.stage_workers;
  ++s_.live_tokens_;
  const size_t i = static_cast<size_t>(slot % kRateBuckets);
  if (s_.rate_slot_[i] != slot) {
    s_.rate_slot_[i] = slot;
    s_.rate_count_[i] = 0;
  }
  ++s_.rate_count_[i];
}

double Server::tokens_per_second() const {
  const auto now = std::chrono::steady_clock::now();
  const int64_t ms = steady_ms(now), slot = ms / kRateBucketMs;
  int64_t n = 0;
  for (size_t i = 0; i < rate_slot_.size(); ++i)
    if (rate_slot_[i] > slot - kRateWindow && rate_slot_[i] <= slot) n += rate_count_[i];
  // The window: the last kRateWindow - 1 whole buckets and the current one so far, or the uptime.
  double seconds = ((kRateWindow - 1) * kRateBucketMs + ms % kRateBucketMs) / 1000.0;
  seconds = std::min(seconds, std::chrono::duration<double>(now - started_).count());
  return seconds > 0 ? n / seconds : 0;
}

nlohmann::json Server::stats_json() const {
  const auto now = std::chrono::steady_clock::now();
  const size_t workers = net_->workers().size();
  std::lock_guard<std::mutex> lock(live_mu_);
  nlohmann::json running = nlohmann::json::array();
  for (const auto& [gid, g] : live_)
    running.push_back({{"model", g.model},
                       {"tokens", g.tokens},
                       {"promptTokens", g.prompt_tokens},
                       {"seconds", std::chrono::duration<double>(now - g.started).count()},
                       {"stages", g.stages}});
  return {{"tokensGenerated", live_tokens_},
          {"promptTokens", live_prompt_tokens_},
          {"activeGenerations", static_cast<int64_t>(live_.size())},
          {"waitingForMemory", net_->sessions().waiting()},
          {"tokensPerSecond", tokens_per_second()},
          {"windowSeconds", kRateWindow * kRateBucketMs / 1000.0},
          {"workers", workers},
          {"models", models_.size()},
          {"uptimeSeconds", std::chrono::duration<double>(now - started_).count()},
          {"generations", running}};
}

}  // namespace bonfire::net
