// ServedModel::generate: one generation as a pipeline of stages on workers,
// with failover (see served_model.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/hop_trace.h"
#include "core/units.h"
#include "net/served_model.h"
#include "net/verifier.h"

namespace bonfire::net {

std::string random_session_id(const std::string& prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return prefix + buf;
}

namespace {

class PipelineRun {
 public:
  PipelineRun(ServedModel& model, Coordinator& net, const ir::GenerateRequest& req, GenerationTrace* trace,
              GenerationChecks checks)
      : m_(model), net_(net), req_(req), trace_(trace), sample_(ir::sample_params(req.sampling)), checks_(checks) {
    // Top-k and top-p always in the graph (0 and 1 are off), so greedy and
    // sampled sequences share one graph and batch together.
    if (!sample_.contains("topK")) sample_["topK"] = 0;
    if (!sample_.contains("topP")) sample_["topP"] = 1;
    // Checked when spot checks are on or the request asks; every response
    // of such a server then says how much of it was checked.
    if (checks_.verifier && (checks_.every_step || checks_.verifier->options().rate > 0))
      track_ = std::make_shared<VerifyTrack>(m_, sample_, req_.prompt, checks_.verifier->sketch_seed());
  }
  ~PipelineRun() {
    free_sessions();
    if (trace_ && track_) trace_->verified = track_->summary();
  }

  int32_t step(const std::vector<int32_t>& tokens, int64_t pos, int64_t step) {
    return checked(step, run_step(tokens, pos, step));
  }

  // The generation ended. One that drew a spot check has its last steps
  // checked too, so a checked generation is checked whole.
  void finished() {
    if (track_ && checked_ && !checks_.every_step) checks_.verifier->check_later(track_, track_->steps() - 1);
  }

 private:
  int32_t run_step(const std::vector<int32_t>& tokens, int64_t pos, int64_t step) {
    if (stages_.empty()) place({});
    bool rebuild = false;
    for (int attempt = 0;; ++attempt) {
      try {
        if (rebuild) replay();
        const int32_t t = step == 0 ? prefill(tokens) : run_once(tokens, pos, step, "decode");
        if (trace_ && step > 0) ++trace_->decode_steps;
        fed_.insert(fed_.end(), tokens.begin(), tokens.end());
        alone_ = false;  // the retry went through: batch again
        return t;
      } catch (const Error& e) {
        // Every step is a graph the coordinator built and checked, so any
        // failure is the worker's: left, silent, refused or wrong. Another
        // worker takes over; one that fails every time is the request's
        // fault, and its error goes back after max_failovers. The replay and
        // retry go in calls of their own, so a row that fails every batched
        // call it is in fails only its own sequence.
        if (attempt >= m_.options().max_failovers) throw;
        if (calling_) suspects_.insert(calling_->id());
        try {
          replace_lost_workers(e.what());
        } catch (const Error& again) {  // no one to take over: say what happened to the one that left
          throw Error(again.code, std::string(again.what()) + " (after: " + e.what() + ")");
        }
        rebuild = true;
        alone_ = true;
      }
    }
  }

  // After step `step` returned `token`: records it for the checks, and
  // either checks it now (every_step: the token is released only when a
  // check says it is right, and a wrong one is replaced by the right one)
  // or, on the verifier's secret coin, queues a check of the steps so far.
  int32_t checked(int64_t step, int32_t token) {
    if (!track_) return token;
    std::vector<std::shared_ptr<RemoteWorker>> workers;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& s : stages_) {
      workers.push_back(s.worker);
      ranges.push_back({s.first, s.end});
    }
    if (step == 0) track_->prompt_chunks(chunks_);
    track_->claim(step, token, std::move(workers), std::move(ranges));
    if (checks_.every_step) {
      for (int attempt = 0;; ++attempt) {
        const Verifier::Outcome o = checks_.verifier->check_now(*track_, step);
        if (o.result == Verifier::Result::Passed) return token;
        if (o.result == Verifier::Result::Caught) {
          track_->correct(step, o.token);
          return o.token;
        }
        if (attempt >= m_.options().max_failovers)
          throw Error(ErrorCode::NoWorker, "\"verify\": step " + std::to_string(step) + " could not be checked: " + o.detail);
      }
    }
    if (checks_.verifier->due()) {
      checked_ = true;
      checks_.verifier->check_later(track_, step);
    }
    return token;
  }

  struct Stage {
    int64_t first = 0, end = 0;
    int64_t weight_bytes = 0;  // what its decode step reads: the worker's speed is this over the call
    std::shared_ptr<RemoteWorker> worker;
    std::string session;
    std::optional<StepScheduler::Member> member;  // while decoding there
  };

  // Assigns workers to the layer ranges, preferring distinct workers and
  // those that have not failed this generation, and reserves each stage's
  // session memory on its worker (net/session_ledger.h). Workers without
  // room are left out and the rest tried; when none has room the generation
  // waits for memory to be given back (or a worker to join), up to the step
  // timeout. A worker whose share could never hold the stage's session is
  // left out too; when only such workers remain, the generation fails at
  // once, naming the sizes.
  void place(const std::set<std::string>& dead) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(m_.options().call_timeout_s * 1000));
    std::set<std::string> full, small;  // no room now; never room
    std::string why_full, why_small;
    for (;;) {
      std::set<std::string> avoid = dead;
      avoid.insert(full.begin(), full.end());
      avoid.insert(small.begin(), small.end());
      try {
        place_once(avoid);
      } catch (const Error&) {
        if (full.empty() && small.empty()) throw;
        if (full.empty()) throw Error(ErrorCode::TooLarge, why_small);
        const auto now = std::chrono::steady_clock::now();
        if (now >= until)
          throw Error(ErrorCode::NoWorker, "no room for another session of " + m_.id() + " within " +
                                               std::to_string(static_cast<int64_t>(m_.options().call_timeout_s)) +
                                               " s: " + why_full);
        net_.sessions().wait_for_release(std::min(until, now + std::chrono::seconds(1)));
        full.clear();
        why_full.clear();
        continue;
      }
      std::vector<SessionLedger::Claim> claims;
      bool unfit = false;  // a stage on a worker whose share could never hold it
      for (const auto& s : stages_) {
        const WorkerInfo info = s.worker->info();
        claims.push_back({info.id, m_.stage_session_bytes(s.first, s.end), SessionLedger::session_budget(info.memory)});
        const auto& c = claims.back();
        if (c.bytes > c.budget) {
          unfit = true;
          small.insert(c.worker);
          why_small = "a session of " + m_.id() + " layers " + std::to_string(s.first) + "-" +
                      std::to_string(s.end - 1) + " keeps " + mib_text(c.bytes) + " at the served context; worker " +
                      c.worker + " takes sessions up to " + mib_text(c.budget) + " (" +
                      std::to_string(SessionLedger::kShareNum) + "/" + std::to_string(SessionLedger::kShareDen) + " of the " +
                      mib_text(info.memory) + " it lends)";
        }
      }
      if (unfit) continue;
      const auto short_of = net_.sessions().try_reserve(claims);
      if (short_of.empty()) {
        claims_ = std::move(claims);
        return;
      }
      for (const auto& a : short_of) {
        full.insert(a.worker);
        why_full += (why_full.empty() ? "" : ", ") + a.worker + " (" + mib_text(a.held) + " of " + mib_text(a.budget) +
                    " taken, " + mib_text(a.asked) + " asked)";
      }
    }
  }

  void place_once(const std::set<std::string>& dead) {
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
    // Each holder's speed (net/placement.h): measured on its decode steps,
    // else guessed from what it announced.
    std::vector<SpeedEvidence> evidence;
    for (const auto& w : holders) evidence.push_back({w->measured_gbs(), w->announced_gbs()});
    const std::vector<double> speeds = placement_speeds(evidence);
    // Least expected wait first: the work ahead of a new sequence (the calls
    // in flight, and the sequences decoding or waiting in the worker's
    // batches; its calls in flight stay at one per stage while they queue in
    // the scheduler, plus its own) over the worker's speed. Workers that have
    // passed spot checks (net/verifier.h) go first among equals, and win
    // against an unchecked one with up to half again its wait.
    std::map<std::string, double> wait, speed;
    for (size_t i = 0; i < holders.size(); ++i) {
      const auto& w = holders[i];
      speed[w->id()] = speeds[i];
      wait[w->id()] = (w->in_flight() + m_.scheduler().load(w->id()) + 1) / speeds[i];
    }
    auto key = [&](const std::shared_ptr<RemoteWorker>& w) {
      return std::make_pair(wait[w->id()] * (w->trusted() ? 1.0 : 1.5), !w->trusted());
    };
    std::stable_sort(holders.begin(), holders.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
    std::vector<StageSlot> slots;
    for (const auto& w : holders) slots.push_back({speed[w->id()], w->info().memory});
    const auto ranges = m_.plan_stages(slots);
    stages_.clear();
    for (size_t i = 0; i < ranges.size(); ++i) {
      Stage s;
      s.first = ranges[i].first;
      s.end = ranges[i].second;
      s.weight_bytes = m_.stage_bytes(s.first, s.end, true);
      s.session = random_session_id("g");
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
      stages_.push_back(std::move(s));
    }
    if (trace_) {
      trace_->stage_workers.clear();
      for (const auto& s : stages_)
        trace_->stage_workers.push_back(s.worker->info().id + ":" + std::to_string(s.first) + "-" +
                                        std::to_string(s.end));
    }
  }

  // The prompt in chunks: while other sequences decode on the first stage, a
  // chunk is about one decode batch's time (StepScheduler::prefill_chunk),
  // so their streams go on between chunks. The first chunk allocates the
  // caches; the rest continue them. A replay uses the same chunks.
  int32_t prefill(const std::vector<int32_t>& prompt) {
    const int64_t n = static_cast<int64_t>(prompt.size());
    const bool again = !chunks_.empty();
    int32_t token = -1;
    size_t k = 0;
    for (int64_t at = 0; at < n; ++k) {
      int64_t len;
      if (again) {
        len = chunks_.at(k);
      } else {
        len = std::min(n - at, m_.scheduler().prefill_chunk(stage_key(stages_[0])));
        chunks_.push_back(len);
      }
      const std::vector<int32_t> part(prompt.begin() + at, prompt.begin() + at + len);
      token = run_once(part, at, 0, at == 0 ? "prefill" : "continue");
      at += len;
    }
    return token;
  }

  std::string stage_key(const Stage& s) const {
    return StepScheduler::stage_key(*s.worker, m_.id(), s.first, s.end);
  }

  int32_t run_once(const std::vector<int32_t>& tokens, int64_t pos, int64_t step, const std::string& mode) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    Tensor ids = Tensor::empty({T});
    for (int64_t i = 0; i < T; ++i) ids.f32()[i] = static_cast<float>(tokens[i]);
    std::map<std::string, Tensor> carry;
    for (size_t si = 0; si < stages_.size(); ++si) {
      Stage& s = stages_[si];
      const auto g = m_.step_graph(s.first, s.end, mode, T, sample_);
      StepCall c;
      c.worker = s.worker;
      c.model = m_.id();
      c.session = s.session;
      c.graph_key = g->key;
      c.call = std::shared_ptr<const json>(g, &g->call);
      c.outputs = &g->outputs;
      c.bind = {{"pos", pos}, {"step", step}};
      if (si + 1 == stages_.size()) c.bind.update(ServedModel::sample_bind(sample_));
      c.tokens = T;
      c.bytes = s.weight_bytes;
      c.batchable = step > 0 && T == 1 && !g->key.empty();
      c.alone = alone_;
      c.inputs["in:tokens"] = ids;
      for (auto& [name, t] : carry) c.inputs["in:" + name] = t;
      const std::string stage = stage_key(s);
      if (c.batchable && !s.member) s.member = m_.scheduler().join(stage);
      calling_ = s.worker;
      hop_trace("step.submit");
      Message reply = m_.scheduler().run(stage, c, m_.options().call_timeout_s);
      hop_trace("step.answered");
      if (trace_ && step > 0)
        if (const auto ms = reply.header.find("ms"); ms != reply.header.end() && ms->is_number())
          trace_->decode_worker_ms += std::max(0.0, ms->get<double>());  // a worker's own report
      if (si + 1 < stages_.size()) {
        carry.clear();
        for (const auto& name : g->carry_out) {
          auto it = reply.tensors.find(name);
          if (it == reply.tensors.end() || it->second.shape.empty() || it->second.shape[0] != T)
            distrust(s, "its stage result lacks " + name + " or has the wrong shape");
          carry[name] = it->second;
          if (track_) track_->record_carry(s.end, name, pos, it->second);
        }
      } else {
        auto it = reply.tensors.find("token");
        if (it == reply.tensors.end() || it->second.numel() != 1)
          distrust(s, it == reply.tensors.end() ? "it returned no token"
                                                : "it returned " + std::to_string(it->second.numel()) + " tokens for one");
        const float t = it->second.f32()[0];
        const int64_t vocab = m_.local().ir()["model"]["vocab"].get<int64_t>();
        if (!std::isfinite(t) || t != std::floor(t) || t < 0 || t >= vocab)
          distrust(s, "it returned the token " + std::to_string(t) + ", outside the vocabulary");
        return static_cast<int32_t>(t);
      }
    }
    throw Error(ErrorCode::Internal, "a pipeline without stages");
  }

  // A worker whose answer cannot be right (no wrong computation gives a
  // token outside the vocabulary) is banned, as one a referee outvoted.
  [[noreturn]] void distrust(Stage& s, const std::string& why) {
    const double ban_s = (checks_.verifier ? checks_.verifier->options() : VerifyOptions{}).ban_s;
    if (!net_.ban(*s.worker, ban_s, "sent an invalid result: " + why)) s.worker->close("sent an invalid result: " + why);
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
    prefill(req_.prompt);
    for (size_t i = req_.prompt.size(); i < fed_.size(); ++i) {
      const int64_t k = static_cast<int64_t>(i) - n;  // decode step k+1 fed fed_[i] at pos n+k
      run_once({fed_[i]}, n + k, k + 1, "decode");
    }
  }

  void free_sessions() {
    for (const auto& s : stages_)
      if (s.worker->alive()) s.worker->send(Message(json{{"type", "free"}, {"session", s.session}}));
    net_.sessions().release(claims_);
    claims_.clear();
  }

  ServedModel& m_;
  Coordinator& net_;
  const ir::GenerateRequest& req_;
  GenerationTrace* trace_;
  json sample_;
  std::vector<Stage> stages_;
  std::vector<SessionLedger::Claim> claims_;  // the stages' session memory, reserved on their workers
  std::vector<int32_t> fed_;  // the prompt, then every decoded token fed back
  std::vector<int64_t> chunks_;  // the prompt's prefill chunks, for a replay
  bool alone_ = false;           // send steps in calls of their own (after a failure)
  std::shared_ptr<RemoteWorker> calling_;  // the worker of the call in progress
  std::set<std::string> suspects_;         // workers that failed a step of this generation
  GenerationChecks checks_;
  std::shared_ptr<VerifyTrack> track_;  // when a verifier checks this generation
  bool checked_ = false;                // a spot check was drawn
};

}  // namespace

ir::GenerateResult ServedModel::generate(Coordinator& net, const ir::GenerateRequest& request,
                                         const ir::TokenCallback& on_token, GenerationTrace* trace,
                                         GenerationChecks checks) {
  PipelineRun run(*this, net, request, trace, checks);
  const auto t0 = std::chrono::steady_clock::now();
  bool first = true;
  ir::GenerateResult result = ir::generate_loop(
      local_->text_model(), request,
      [&](const std::vector<int32_t>& tokens, int64_t pos, int64_t step) { return run.step(tokens, pos, step); },
      [&](int32_t id, const std::string& text) {
        if (first && trace)
          trace->first_token_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        first = false;
        return on_token ? on_token(id, text) : true;
      });
  run.finished();
  return result;
}

}  // namespace bonfire::net
