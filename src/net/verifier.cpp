#include "net/verifier.h"

#include <algorithm>

#include "core/error.h"
#include "net/served_model.h"
#include "net/token_check.h"

namespace bonfire::net {

using nlohmann::json;

namespace {

// How far an honest recomputation of a stage's output may be from the
// worker's, relative to its norm. With stepNumerics and the prompt's own
// chunks the two agree to f32 reassociation (~1e-6); a liar's 1% is 1e-2.
constexpr double kCarryTolerance = 1e-3;

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A check runs layer range i of `count` in its own session on the checker
// (one range: `session` itself).
std::string range_session(const std::string& session, size_t i, size_t count) {
  return count <= 1 ? session : session + "." + std::to_string(i);
}

void free_range_sessions(RemoteWorker& w, const std::string& session, size_t count) {
  if (!w.alive() || session.empty()) return;
  for (size_t i = 0; i < std::max<size_t>(count, 1); ++i)
    w.send(Message(json{{"type", "free"}, {"session", range_session(session, i, count)}}));
}

}  // namespace

VerifyTrack::VerifyTrack(ServedModel& model, json sample, std::vector<int32_t> prompt, uint64_t sketch_seed)
    : model_(model), sample_(std::move(sample)), prompt_(std::move(prompt)), sketch_seed_(sketch_seed) {}

// s_j = sum_i sign_ji x_i with secret random signs: E[(s_j - s'_j)^2] is
// |x - x'|^2, so the sketches of two rows estimate their distance.
VerifyTrack::Sketch VerifyTrack::sketch(const float* x, int64_t width) const {
  Sketch k;
  double norm = 0;
  for (int64_t i = 0; i < width; ++i) norm += double(x[i]) * x[i];
  k.norm = static_cast<float>(std::sqrt(norm));
  for (int j = 0; j < kSketch; ++j) {
    double s = 0;
    for (int64_t i = 0; i < width; i += 64) {
      const uint64_t bits = mix(sketch_seed_ ^ (uint64_t(j) << 48) ^ uint64_t(i));
      for (int64_t b = 0; b < 64 && i + b < width; ++b) s += (bits >> b & 1) ? x[i + b] : -x[i + b];
    }
    k.s[j] = static_cast<float>(s);
  }
  return k;
}

void VerifyTrack::record_carry(int64_t boundary, const std::string& name, int64_t first_pos, const Tensor& rows) {
  const int64_t width = rows.cols();
  std::vector<Sketch> ks;
  for (int64_t r = 0; r < rows.rows(); ++r) ks.push_back(sketch(rows.f32() + r * width, width));
  // The first value recorded stands: a failover's replay on other workers
  // must not overwrite the evidence of what the generation actually used.
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t r = 0; r < ks.size(); ++r) sketches_.emplace(std::make_tuple(boundary, name, first_pos + static_cast<int64_t>(r)), ks[r]);
}

VerifyTrack::~VerifyTrack() { free_verifier(); }

void VerifyTrack::free_verifier() {
  if (verifier_) free_range_sessions(*verifier_, session_, ranges_.size());
  verifier_.reset();
}

void VerifyTrack::claim(int64_t step, int32_t token, std::vector<std::shared_ptr<RemoteWorker>> workers,
                        std::vector<std::pair<int64_t, int64_t>> ranges) {
  std::lock_guard<std::mutex> lock(mu_);
  if (step != static_cast<int64_t>(claims_.size()))
    throw Error(ErrorCode::Internal, "verify: step " + std::to_string(step) + " claimed out of order");
  claims_.push_back({token, std::move(workers), std::move(ranges)});
}

void VerifyTrack::prompt_chunks(std::vector<int64_t> chunks) {
  std::lock_guard<std::mutex> lock(mu_);
  chunks_ = std::move(chunks);
}

void VerifyTrack::correct(int64_t step, int32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_.at(static_cast<size_t>(step)).token = token;
  ++verified_;  // the token the verifier and the referee agree on
}

std::string VerifyTrack::int8_rows_at(int64_t pos, int64_t last, int64_t layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t n = static_cast<int64_t>(prompt_.size());
  const auto fed_by = [n](int64_t p) { return p < n ? 0 : p - n + 1; };  // the step that fed position p
  const size_t step = static_cast<size_t>(fed_by(pos < n ? std::max(last, pos) : pos));
  if (step >= claims_.size()) return "";
  const Claim& c = claims_[step];
  for (size_t i = 0; i < c.ranges.size() && i < c.workers.size(); ++i)
    if (c.ranges[i].first <= layer && layer < c.ranges[i].second) return c.workers[i]->info().int8_rows;
  return "";
}

int64_t VerifyTrack::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(claims_.size());
}

json VerifyTrack::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"tokens", claims_.size()},
          {"verified", verified_},
          {"pending", pending_},
          {"inconclusive", inconclusive_},
          {"wrongFound", wrong_found_}};
}

Verifier::Verifier(Coordinator& net, VerifyOptions options)
    : net_(net), options_(options), coin_(options.seed ? options.seed : std::random_device{}()) {
  sketch_seed_ = coin_();
  thread_ = std::thread([this] { loop(); });
}

Verifier::~Verifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Verifier::due() {
  if (options_.rate <= 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return std::uniform_real_distribution<double>(0, 1)(coin_) < options_.rate;
}

void Verifier::check_later(std::shared_ptr<VerifyTrack> track, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  if (jobs_.size() >= options_.max_pending) {
    ++skipped_;
    return;
  }
  {
    std::lock_guard<std::mutex> tl(track->mu_);
    ++track->pending_;
  }
  jobs_.push_back({std::move(track), step});
  cv_.notify_all();
}

void Verifier::loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = true;
    }
    try {
      const Outcome o = check_now(*job.track, job.step);
      // A step nobody could decide stays unchecked, but a later check of
      // this track starts after it: it would disagree the same way again,
      // and each retry recomputes the whole prefix. (A "verify": true
      // generation calls check_now itself and retries the step instead.)
      if (o.result == Result::Inconclusive && o.step >= 0) {
        std::lock_guard<std::mutex> tl(job.track->mu_);
        if (job.track->next_step_ <= o.step) {
          job.track->verified_ += o.step - job.track->next_step_;  // the steps before it agreed
          job.track->next_step_ = o.step + 1;
        }
      }
    } catch (const std::exception&) {
      // check_now turns every failure into an inconclusive outcome; this
      // thread must outlive anything unexpected.
    }
    {
      std::lock_guard<std::mutex> tl(job.track->mu_);
      --job.track->pending_;
    }
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
  }
}

json Verifier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"rate", options_.rate},       {"passed", passed_},       {"failed", failed_},
          {"inconclusive", inconclusive_}, {"skipped", skipped_},     {"banned", banned_},
          {"waiting", jobs_.size() + (running_ ? 1 : 0)},       {"stepsPassed", steps_passed_}, {"disagreements", disagreements_},
          {"nearTies", near_ties_}, {"lastDisagreement", last_disagreement_}};
}

std::shared_ptr<RemoteWorker> Verifier::pick(ServedModel& m, const std::set<std::string>& exclude) const {
  const auto g = m.step_graph(0, m.n_layers(), "verify-prefill", 1, json::object());
  std::shared_ptr<RemoteWorker> best;
  auto rank = [](const RemoteWorker& w) {
    const WorkerInfo i = w.info();
    return std::make_tuple(i.local ? 0 : 1, w.trusted() ? 0 : 1, w.in_flight());
  };
  for (const auto& w : net_.workers()) {
    if (!w->alive() || exclude.count(w->id())) continue;
    const WorkerInfo info = w->info();
    bool holds = false;
    for (const auto& [mid, h] : info.models) holds = holds || h == m.fingerprint().hash;
    if (!holds || info.memory * 9 / 10 < m.total_bytes()) continue;
    bool ok = true;
    for (const auto& f : g->features) ok = ok && info.features.count(f);
    for (const auto& o : g->ops) ok = ok && info.ops.count(o);
    if (ok && (!best || rank(*w) < rank(*best))) best = w;
  }
  return best;
}

std::vector<float> Verifier::run_window(VerifyTrack& t, RemoteWorker& w, const std::string& session,
                                        const std::vector<int32_t>& tokens, int64_t from, int64_t to,
                                        int64_t keep_from, const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                        const CarryFn& on_carry) {
  ServedModel& m = t.model_;
  const int64_t L = m.n_layers();
  const int64_t n = static_cast<int64_t>(t.prompt_.size());
  const int64_t chunk = std::max<int64_t>(1, m.scheduler().options().max_chunk);
  const int64_t vocab = m.local().ir()["model"]["vocab"].get<int64_t>();
  std::vector<int64_t> prompt_ends;  // where the generation's prompt chunks ended
  {
    std::lock_guard<std::mutex> lock(t.mu_);
    int64_t at = 0;
    for (int64_t len : t.chunks_) prompt_ends.push_back(at += len);
  }
  if (prompt_ends.empty() || prompt_ends.back() != n)
    throw Error(ErrorCode::Internal, "verify: the prompt's chunks are not known");
  std::vector<float> kept;
  const auto worker = net_.find(w.id());
  if (!worker) throw Error(ErrorCode::NoWorker, "the verifier left");
  std::vector<std::pair<int64_t, int64_t>> stages = ranges;
  if (stages.empty()) stages = {{0, L}};
  for (int64_t a = from; a < to;) {
    // The prompt goes in the generation's own chunks, so every product
    // takes the path it took there: ops/gemm.h picks int8 or f32 by rows,
    // by the rule the generating worker announced ("int8Rows"), which the
    // checker is told to follow since its CPU may have another. The last
    // chunk gives step 0's logits as the generation's head did. After it,
    // each position was a one-token step: the rest goes in chunks computed
    // row by row as such steps ("stepNumerics").
    int64_t b;
    std::string mode;
    const bool in_prompt = a < n;
    if (in_prompt) {
      const auto it = std::upper_bound(prompt_ends.begin(), prompt_ends.end(), a);
      b = *it;
      if (it != prompt_ends.begin() && *(it - 1) != a)
        throw Error(ErrorCode::Internal, "verify: a window starts inside a prompt chunk");
      mode = b == n && keep_from < n ? "verify-last-" : "";
    } else {
      b = std::min(to, a + chunk);
      mode = "verify-";
    }
    mode += a == 0 ? "prefill" : "continue";
    const int64_t T = b - a;
    Tensor ids = Tensor::empty({T});
    for (int64_t i = 0; i < T; ++i) ids.f32()[i] = static_cast<float>(tokens[a + i]);
    std::map<std::string, Tensor> carry;
    for (size_t si = 0; si < stages.size(); ++si) {
      const auto [first, end] = stages[si];
      const bool last = end == L;
      const auto g = m.step_graph(first, end, mode, T, t.sample_);
      StepCall c;
      c.worker = worker;
      c.model = m.id();
      c.session = range_session(session, si, stages.size());
      c.call = std::shared_ptr<const json>(g, &g->call);
      c.outputs = &g->outputs;
      c.bind = json{{"pos", a}, {"step", 0}};
      if (last && (mode == "prefill" || mode == "continue")) c.bind.update(ServedModel::sample_bind(t.sample_));
      c.tokens = T;
      c.step_numerics = !in_prompt;
      c.int8_rows = t.int8_rows_at(a, to - 1, first);
      if (!in_prompt && c.int8_rows == "few") c.int8_rows = "any";  // a one-token step's rows are few
      c.inputs["in:tokens"] = ids;
      for (auto& [name, v] : carry) c.inputs["in:" + name] = v;
      Message reply = m.scheduler().run(StepScheduler::stage_key(*worker, m.id(), first, end), c, options_.call_timeout_s);
      if (!last) {
        carry.clear();
        for (const auto& name : g->carry_out) {
          auto it = reply.tensors.find(name);
          if (it == reply.tensors.end() || it->second.shape.empty() || it->second.shape[0] != T)
            throw Error(ErrorCode::NoWorker, "the checker's stage result lacks " + name);
          if (on_carry) on_carry(end, name, a, it->second);
          carry[name] = it->second;
        }
        continue;
      }
      if (mode.rfind("verify-", 0) != 0) continue;
      const int64_t rows = mode.rfind("verify-last-", 0) == 0 ? 1 : T;
      auto it = reply.tensors.find("logits");
      if (it == reply.tensors.end() || it->second.numel() != rows * vocab)
        throw Error(ErrorCode::NoWorker, "the verifier's reply lacks the logits of " + std::to_string(rows) + " positions");
      const float* l = it->second.f32();
      for (int64_t p = std::max(b - rows, keep_from); p < b; ++p)
        kept.insert(kept.end(), l + (p - (b - rows)) * vocab, l + (p - (b - rows) + 1) * vocab);
    }
    a = b;
  }
  return kept;
}

Verifier::Outcome Verifier::check_now(VerifyTrack& t, int64_t upto) {
  std::lock_guard<std::mutex> check_lock(t.check_mu_);
  Outcome o;
  const int64_t n = static_cast<int64_t>(t.prompt_.size());
  std::vector<int32_t> fed = t.prompt_;
  std::vector<VerifyTrack::Claim> claims;  // steps [first, upto]
  int64_t first;
  {
    std::lock_guard<std::mutex> lock(t.mu_);
    upto = std::min<int64_t>(upto, static_cast<int64_t>(t.claims_.size()) - 1);
    first = t.next_step_;
    if (first > upto) return o;
    for (int64_t k = 0; k < upto; ++k) fed.push_back(t.claims_[k].token);
    claims.assign(t.claims_.begin() + first, t.claims_.begin() + upto + 1);
  }
  auto tally = [&](Result r) {
    std::lock_guard<std::mutex> lock(mu_);
    (r == Result::Passed ? passed_ : r == Result::Caught ? failed_ : inconclusive_) += 1;
  };
  auto inconclusive = [&](const std::string& why) {
    tally(Result::Inconclusive);
    std::lock_guard<std::mutex> lock(t.mu_);
    ++t.inconclusive_;
    o.result = Result::Inconclusive;
    o.detail = why;
    return o;
  };
  std::set<std::string> makers;
  for (const auto& c : claims)
    for (const auto& w : c.workers) makers.insert(w->id());
  // The verifier: never a worker whose steps it checks; a new one starts
  // its session from the first position.
  // A pipeline is recomputed stage by stage (one session per range), so
  // each stage's output can be compared with the sketch the coordinator
  // kept of the generation's; a new placement starts a new session.
  const auto& ranges = claims.back().ranges;
  if (!t.verifier_ || !t.verifier_->alive() || makers.count(t.verifier_->id()) || t.ranges_ != ranges) {
    t.free_verifier();
    t.ranges_ = ranges;
    t.verifier_ = pick(t.model_, makers);
    t.session_ = random_session_id("v");
    t.pos_ = 0;
    if (!t.verifier_) return inconclusive("no other worker can check model " + t.model_.id());
  }
  const auto verifier = t.verifier_;
  std::vector<float> logits;
  Deviation off;
  try {
    logits = run_window(t, *verifier, t.session_, fed, t.pos_, n + upto, n + first - 1, t.ranges_,
                        t.ranges_.size() > 1 ? compare_carries(t, &off) : CarryFn());
  } catch (const std::exception& e) {
    t.verifier_.reset();  // its session's state is unknown now
    return inconclusive(std::string("the verifier ") + verifier->id() + " failed: " + e.what());
  }
  t.pos_ = n + upto;
  const int64_t V = static_cast<int64_t>(logits.size()) / (upto - first + 1);
  int64_t bad = -1;
  TokenVerdict verdict;
  // A stage's output off at position p: the step that fed p made it.
  const int64_t off_step = off.pos < 0 ? -1 : std::max(first, off.pos < n ? 0 : off.pos - n + 1);
  for (int64_t k = first; k <= upto && bad < 0; ++k) {
    const std::vector<int32_t> history(fed.begin(), fed.begin() + n + k);
    verdict = check_token(logits.data() + (k - first) * V, V, t.sample_, k, history, claims[k - first].token);
    if (verdict.agreement == TokenAgreement::Differs || k == off_step) bad = k;
    if (verdict.agreement == TokenAgreement::NearTie) {
      std::lock_guard<std::mutex> lock(mu_);
      ++near_ties_;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bad >= 0) ++disagreements_;
    steps_passed_ += (bad < 0 ? upto + 1 : bad) - first;
  }
  if (bad < 0) {
    for (const auto& c : claims)
      for (const auto& w : c.workers) w->note_check(CheckResult::Passed);
    verifier->note_check(CheckResult::Passed);
    tally(Result::Passed);
    std::lock_guard<std::mutex> lock(t.mu_);
    t.verified_ += upto - first + 1;
    t.next_step_ = upto + 1;
    return o;
  }
  // A disagreement: the referee decides who was wrong. In a pipeline it
  // recomputes stage by stage and names the stage (attribute).
  const auto& wrong = claims[bad - first];
  std::set<std::string> exclude = {verifier->id()};
  for (const auto& w : wrong.workers) exclude.insert(w->id());
  Outcome r;
  std::string stage_why;
  std::shared_ptr<RemoteWorker> culprit;
  if (wrong.workers.size() > 1) {
    bool unavailable = false;
    culprit = attribute(t, bad, exclude, &stage_why, &unavailable);
    r.result = unavailable ? Result::Inconclusive : culprit ? Result::Caught : Result::Passed;
    r.token = verdict.token;
    r.detail = "a referee" + stage_why;
    stage_why.clear();
  } else {
    r = referee(t, bad, verdict.token, exclude);
    if (r.result == Result::Caught) culprit = wrong.workers[0];
  }
  const std::string where =
      off_step == bad ? "step " + std::to_string(bad) + ": the output of the stage ending at layer " +
                            std::to_string(off.boundary) + " at position " + std::to_string(off.pos) + " was off by " +
                            std::to_string(off.rel) + " of its norm for the verifier " + verifier->id() + "; " + r.detail
                      : "step " + std::to_string(bad) + " returned " + std::to_string(wrong.token) + ", the verifier " +
                            verifier->id() + " drew " + std::to_string(verdict.token) + " (logit gap " +
                            std::to_string(verdict.gap) + "); " + r.detail;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string by;
    for (const auto& w : wrong.workers) by += (by.empty() ? "" : ", ") + w->id();
    last_disagreement_ = t.model_.id() + " (made by " + by + "): " + where;
  }
  if (culprit) {
    convict(*culprit, "a spot check found a wrong result: " + where + stage_why);
    tally(Result::Caught);
    std::lock_guard<std::mutex> lock(t.mu_);
    t.verified_ += bad - first;
    t.next_step_ = upto + 1;
    t.wrong_found_ = true;
    o.result = Result::Caught;
    o.step = bad;
    o.token = r.token;
    o.detail = where;
    return o;
  }
  if (r.result == Result::Passed && !verifier->info().local) {
    convict(*verifier, "a referee contradicted it as a verifier: " + where);
    t.free_verifier();  // the window is checked again by another
    return inconclusive(where);
  }
  // Nobody to decide (no referee, one that agrees with neither, a stage
  // that cannot be pinned): the step stays unchecked, and the next check
  // starts over on a new session.
  t.free_verifier();
  o = inconclusive(where);
  o.step = bad;
  return o;
}

Verifier::CarryFn Verifier::compare_carries(VerifyTrack& t, Deviation* off) {
  return [&t, off](int64_t boundary, const std::string& name, int64_t first_pos, const Tensor& rows) {
    const int64_t width = rows.cols();
    for (int64_t r = 0; r < rows.rows(); ++r) {
      const int64_t pos = first_pos + r;
      VerifyTrack::Sketch want;
      {
        std::lock_guard<std::mutex> lock(t.mu_);
        auto it = t.sketches_.find({boundary, name, pos});
        if (it == t.sketches_.end()) continue;
        want = it->second;
      }
      const VerifyTrack::Sketch got = t.sketch(rows.f32() + r * width, width);
      double d2 = 0;
      for (int j = 0; j < VerifyTrack::kSketch; ++j) d2 += double(got.s[j] - want.s[j]) * (got.s[j] - want.s[j]);
      const double rel = std::sqrt(d2 / VerifyTrack::kSketch) / std::max<double>(got.norm, 1e-30);
      if (rel > kCarryTolerance &&
          (off->pos < 0 || std::make_pair(pos, boundary) < std::make_pair(off->pos, off->boundary)))
        *off = {pos, boundary, rel};
    }
  };
}

std::shared_ptr<RemoteWorker> Verifier::attribute(VerifyTrack& t, int64_t bad, const std::set<std::string>& exclude,
                                                  std::string* why, bool* unavailable) {
  std::vector<VerifyTrack::Claim> claims;
  {
    std::lock_guard<std::mutex> lock(t.mu_);
    claims.assign(t.claims_.begin(), t.claims_.begin() + bad + 1);
  }
  const int64_t n = static_cast<int64_t>(t.prompt_.size());
  Deviation off;
  Recomputed r;
  try {
    r = recompute(t, bad, exclude, claims[bad].ranges, compare_carries(t, &off));
  } catch (const std::exception& e) {
    *unavailable = true;
    *why = std::string("; the stage-by-stage referee failed: ") + e.what();
    return nullptr;
  }
  *unavailable = !r.checker;
  if (!r.checker) {
    *why = "; no referee available";
    return nullptr;
  }
  const auto& checker = r.checker;
  checker->note_check(CheckResult::Passed);
  const int64_t pos = off.pos, boundary = off.boundary;
  const double rel = off.rel;
  if (pos < 0) {
    const TokenVerdict v = check_token(r.logits.data(), static_cast<int64_t>(r.logits.size()), t.sample_, bad,
                                       r.history, claims[bad].token);
    if (v.agreement != TokenAgreement::Differs) {
      *why = "; stage by stage on " + checker->id() + ", the generation's outputs and token agree";
      return nullptr;  // the generation was right
    }
    *why = "; stage by stage on " + checker->id() + ", every stage's output agreed: the last stage drew it";
    return claims[bad].workers.back();
  }
  const auto& at = claims[pos < n ? 0 : pos - n + 1];
  for (size_t i = 0; i < at.ranges.size() && i < at.workers.size(); ++i)
    if (at.ranges[i].second == boundary) {
      *why = "; stage by stage on " + checker->id() + ": the output of layers " + std::to_string(at.ranges[i].first) +
             "-" + std::to_string(boundary - 1) + " at position " + std::to_string(pos) + " was off by " +
             std::to_string(rel) + " of its norm";
      return at.workers[i];
    }
  *unavailable = true;  // placed otherwise at that position: not pinned
  *why = "; the stage that was off is not known";
  return nullptr;
}

void Verifier::convict(RemoteWorker& w, const std::string& why) {
  w.note_check(CheckResult::Failed);
  if (!net_.ban(w, options_.ban_s, why)) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++banned_;
}

Verifier::Recomputed Verifier::recompute(VerifyTrack& t, int64_t step, const std::set<std::string>& exclude,
                                         const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                         const CarryFn& on_carry) {
  Recomputed r;
  r.history = t.prompt_;
  {
    std::lock_guard<std::mutex> lock(t.mu_);
    for (int64_t k = 0; k < step; ++k) r.history.push_back(t.claims_[k].token);
  }
  r.checker = pick(t.model_, exclude);
  if (!r.checker) return r;
  const int64_t end = static_cast<int64_t>(r.history.size());
  const std::string session = random_session_id("r");
  try {
    r.logits = run_window(t, *r.checker, session, r.history, 0, end, end - 1, ranges, on_carry);
  } catch (...) {
    free_range_sessions(*r.checker, session, ranges.size());
    throw;
  }
  free_range_sessions(*r.checker, session, ranges.size());
  return r;
}

Verifier::Outcome Verifier::referee(VerifyTrack& t, int64_t step, int32_t verifier_token,
                                    const std::set<std::string>& exclude) {
  Outcome o;
  o.result = Result::Inconclusive;
  int32_t claimed;
  {
    std::lock_guard<std::mutex> lock(t.mu_);
    claimed = t.claims_[step].token;
  }
  Recomputed r;
  try {
    r = recompute(t, step, exclude);
  } catch (const std::exception& e) {
    o.detail = std::string("the referee failed: ") + e.what();
    return o;
  }
  if (!r.checker) {
    o.detail = "no referee available";
    return o;
  }
  const int64_t V = static_cast<int64_t>(r.logits.size());
  const TokenVerdict on_claim = check_token(r.logits.data(), V, t.sample_, step, r.history, claimed);
  const TokenVerdict on_verifier = check_token(r.logits.data(), V, t.sample_, step, r.history, verifier_token);
  o.token = on_claim.token;
  o.step = step;
  const std::string ref = "the referee " + r.checker->id();
  if (on_claim.agreement == TokenAgreement::Differs && on_verifier.agreement != TokenAgreement::Differs) {
    o.result = Result::Caught;
    o.detail = ref + " agrees with the verifier";
  } else if (on_claim.agreement != TokenAgreement::Differs && on_verifier.agreement == TokenAgreement::Differs) {
    o.result = Result::Passed;  // the verifier was wrong
    o.detail = ref + " agrees with the worker";
  } else {
    o.detail = ref + " agrees with neither";
  }
  r.checker->note_check(o.result == Result::Inconclusive ? CheckResult::Inconclusive : CheckResult::Passed);
  return o;
}

}  // namespace bonfire::net
