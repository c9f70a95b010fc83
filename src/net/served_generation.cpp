// ServedModel::generate: one generation as a pipeline of stages on workers,
// with failover (see served_model.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/error.h"
#include "net/served_model.h"

namespace bonfire::net {

namespace {

std::string random_id(const std::string& prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return prefix + buf;
}

class PipelineRun {
 public:
  PipelineRun(ServedModel& model, Coordinator& net, const ir::GenerateRequest& req, GenerationTrace* trace)
      : m_(model), net_(net), req_(req), trace_(trace), sample_(ir::sample_params(req.sampling)) {}
  ~PipelineRun() { free_sessions(); }

  int32_t step(const std::vector<int32_t>& tokens, int64_t pos, int64_t step) {
    if (stages_.empty()) place({});
    bool rebuild = false;
    for (int attempt = 0;; ++attempt) {
      try {
        if (rebuild) replay();
        const int32_t t = run_once(tokens, pos, step);
        if (trace_ && step > 0) ++trace_->decode_steps;
        fed_.insert(fed_.end(), tokens.begin(), tokens.end());
        return t;
      } catch (const Error& e) {
        // Every step is a graph the coordinator built and checked, so any
        // failure is the worker's: left, silent, refused or wrong. Another
        // worker takes over; one that fails every time is the request's
        // fault, and its error goes back after max_failovers.
        if (attempt >= m_.options().max_failovers) throw;
        if (calling_) suspects_.insert(calling_->id());
        replace_lost_workers(e.what());
        rebuild = true;
      }
    }
  }

 private:
  struct Stage {
    int64_t first = 0, end = 0;
    std::shared_ptr<RemoteWorker> worker;
    std::string session;
  };

  // Assigns workers to the layer ranges, preferring distinct workers and
  // those that have not failed this generation.
  void place(const std::set<std::string>& dead) {
    std::set<std::string> avoid = dead;
    avoid.insert(suspects_.begin(), suspects_.end());
    try {
      place_avoiding(avoid);
    } catch (const Error& e) {
      if (avoid.size() == dead.size() || (e.code != ErrorCode::NoWorker && e.code != ErrorCode::UnsupportedFeature))
        throw;
      place_avoiding(dead);  // only suspects are left: try them again
    }
  }

  void place_avoiding(const std::set<std::string>& dead) {
    const std::string& hash = m_.fingerprint().hash;
    std::vector<std::shared_ptr<RemoteWorker>> holders;
    for (const auto& w : net_.workers()) {
      if (!w->alive() || dead.count(w->info().id)) continue;
      for (const auto& [mid, h] : w->info().models)
        if (h == hash) {
          holders.push_back(w);
          break;
        }
    }
    if (holders.empty()) {
      // Let pick() say why (no worker at all, a missing feature, ...).
      const auto g = m_.step_graph(0, m_.n_layers(), "decode", 1, sample_);
      net_.pick(g->ops, g->features, hash, dead);
      throw Error(ErrorCode::NoWorker, "no connected worker holds model " + m_.id());
    }
    std::sort(holders.begin(), holders.end(), [](const auto& a, const auto& b) {
      return a->in_flight() * std::max(1.0, a->ms_per_call()) < b->in_flight() * std::max(1.0, b->ms_per_call());
    });
    std::vector<int64_t> memories;
    for (const auto& w : holders) memories.push_back(w->info().memory);
    const auto ranges = m_.plan_stages(memories);
    stages_.clear();
    for (size_t i = 0; i < ranges.size(); ++i) {
      Stage s;
      s.first = ranges[i].first;
      s.end = ranges[i].second;
      s.session = random_id("g");
      // The stage's graph decides which workers qualify (features).
      const auto g = m_.step_graph(s.first, s.end, "decode", 1, sample_);
      for (size_t k = 0; k < holders.size() && !s.worker; ++k) {
        const auto& w = holders[(i + k) % holders.size()];
        const WorkerInfo info = w->info();
        bool ok = true;
        for (const auto& f : g->features) ok = ok && info.features.count(f);
        for (const auto& o : g->ops) ok = ok && info.ops.count(o);
        if (ok) s.worker = w;
      }
      if (!s.worker) s.worker = net_.pick(g->ops, g->features, hash, dead);
      stages_.push_back(s);
    }
    if (trace_) {
      trace_->stage_workers.clear();
      for (const auto& s : stages_)
        trace_->stage_workers.push_back(s.worker->info().id + ":" + std::to_string(s.first) + "-" +
                                        std::to_string(s.end));
    }
  }

  int32_t run_once(const std::vector<int32_t>& tokens, int64_t pos, int64_t step) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    const std::string mode = step == 0 ? "prefill" : "decode";
    Tensor ids = Tensor::empty({T});
    for (int64_t i = 0; i < T; ++i) ids.f32()[i] = static_cast<float>(tokens[i]);
    std::map<std::string, Tensor> carry;
    for (size_t si = 0; si < stages_.size(); ++si) {
      Stage& s = stages_[si];
      const auto g = m_.step_graph(s.first, s.end, mode, T, sample_);
      Message msg(json{{"type", "run"},
                       {"model", m_.id()},
                       {"session", s.session},
                       {"bind", {{"pos", pos}, {"step", step}}}});
      const bool registered = !g->key.empty() && s.worker->has_graph(g->key);
      if (!g->key.empty()) msg.header["graph"] = g->key;
      if (!registered) msg.header["call"] = g->call;
      msg.tensors["in:tokens"] = ids;
      for (auto& [name, t] : carry) msg.tensors["in:" + name] = t;
      calling_ = s.worker;
      Message reply = s.worker->call(std::move(msg), m_.options().call_timeout_s, CallKind::Step, &g->outputs);
      if (trace_ && step > 0)
        if (const auto ms = reply.header.find("ms"); ms != reply.header.end() && ms->is_number())
          trace_->decode_worker_ms += std::max(0.0, ms->get<double>());  // a worker's own report
      if (!g->key.empty()) s.worker->note_graph(g->key);
      if (si + 1 < stages_.size()) {
        carry.clear();
        for (const auto& name : g->carry_out) {
          auto it = reply.tensors.find(name);
          if (it == reply.tensors.end() || it->second.shape.empty() || it->second.shape[0] != T)
            distrust(s, "its stage result lacks " + name + " or has the wrong shape");
          carry[name] = it->second;
        }
      } else {
        auto it = reply.tensors.find("token");
        if (it == reply.tensors.end() || it->second.numel() != 1) distrust(s, "it returned no token");
        const float t = it->second.f32()[0];
        const int64_t vocab = m_.local().ir()["model"]["vocab"].get<int64_t>();
        if (!std::isfinite(t) || t != std::floor(t) || t < 0 || t >= vocab)
          distrust(s, "it returned the token " + std::to_string(t) + ", outside the vocabulary");
        return static_cast<int32_t>(t);
      }
    }
    throw Error(ErrorCode::Internal, "a pipeline without stages");
  }

  // A worker whose answer cannot be right is dropped like one that left.
  [[noreturn]] void distrust(Stage& s, const std::string& why) {
    s.worker->close("sent an invalid result: " + why);
    throw Error(ErrorCode::NoWorker, "worker " + s.worker->info().id + " sent an invalid result: " + why);
  }

  // New placement without the workers that are gone; every stage gets a
  // fresh session (a survivor's old one may hold a half-written step).
  void replace_lost_workers(const std::string& why) {
    if (trace_) ++trace_->failovers;
    std::set<std::string> dead;
    for (const auto& s : stages_)
      if (!s.worker->alive()) dead.insert(s.worker->info().id);
    for (const auto& id : dead)
      if (net_.on_event) net_.on_event("failover", id, m_.id() + ": " + why);
    free_sessions();
    place(dead);
  }

  // Rebuilds the sessions by replaying the prompt and each token fed since,
  // with the same graphs and RNG steps as the first time.
  void replay() {
    if (fed_.empty()) return;  // the prefill itself failed: just run it again
    const int64_t n = static_cast<int64_t>(req_.prompt.size());
    run_once(req_.prompt, 0, 0);
    for (size_t i = req_.prompt.size(); i < fed_.size(); ++i) {
      const int64_t k = static_cast<int64_t>(i) - n;  // decode step k+1 fed fed_[i] at pos n+k
      run_once({fed_[i]}, n + k, k + 1);
    }
  }

  void free_sessions() {
    for (const auto& s : stages_)
      if (s.worker->alive()) s.worker->send(Message(json{{"type", "free"}, {"session", s.session}}));
  }

  ServedModel& m_;
  Coordinator& net_;
  const ir::GenerateRequest& req_;
  GenerationTrace* trace_;
  json sample_;
  std::vector<Stage> stages_;
  std::vector<int32_t> fed_;  // the prompt, then every decoded token fed back
  std::shared_ptr<RemoteWorker> calling_;  // the worker of the call in progress
  std::set<std::string> suspects_;         // workers that failed a step of this generation
};

}  // namespace

ir::GenerateResult ServedModel::generate(Coordinator& net, const ir::GenerateRequest& request,
                                         const ir::TokenCallback& on_token, GenerationTrace* trace) {
  PipelineRun run(*this, net, request, trace);
  const auto t0 = std::chrono::steady_clock::now();
  bool first = true;
  return ir::generate_loop(
      local_->text_model(), request,
      [&](const std::vector<int32_t>& tokens, int64_t pos, int64_t step) { return run.step(tokens, pos, step); },
      [&](int32_t id, const std::string& text) {
        if (first && trace)
          trace->first_token_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        first = false;
        return on_token ? on_token(id, text) : true;
      });
}

}  // namespace bonfire::net
