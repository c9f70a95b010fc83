// Checking workers by redundant execution (docs/NETWORK.md "Checking
// workers"). bonfire's ops are deterministic for a SIMD target and its
// sampling is keyed on (seed, step), so recomputing a step on another worker
// is a precise check of the worker that ran it.
//
// The design, given that KV caches stay on the worker that made them: a
// check recomputes a *window* of a generation's steps on a verifier worker,
// teacher-forced. The verifier keeps its own session for the generation and
// feeds it the tokens the generation actually fed (the prompt, then each
// token a step returned), as prefill chunks with the logits of every
// position; each step's token is then redrawn from the logits at its
// position with the request's sampling params and compared with what the
// worker returned (net/token_check.h: exact, or a near tie within the f32
// bound). A check covers every step since the generation's last check, so a
// lie anywhere in a checked generation is found, and the verifier's session
// grows with each check instead of replaying the prefix again.
//
// A pipeline is recomputed with the generation's layer ranges, and each
// stage's output is compared with a sketch the coordinator kept of the
// generation's (VerifyTrack::record_carry), so a wrong hidden state is
// found even when no token changed, and pinned on its stage.
//
// Which steps start a check is drawn per step with probability `rate` from
// a secret seed, so a worker cannot tell which of its answers are checked.
// A disagreement goes to a referee (a third worker, fresh session, the
// prefix in one prefill): the worker the referee contradicts is banned
// (Coordinator::ban) and its generations fail over; a referee that agrees
// with neither, or none available, leaves the check inconclusive, never a
// penalty. Checks run on one background thread; `"verify": true` requests
// check every step before its token is released (check_now).
#pragma once
#include <array>
#include <condition_variable>
#include <map>
#include <tuple>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/coordinator.h"

namespace bonfire::net {

class ServedModel;

struct VerifyOptions {
  double rate = 0;        // serve --verify-rate: fraction of steps that start a check
  uint64_t seed = 0;      // serve --verify-seed (tests only); 0 draws a secret one
  double ban_s = 3600;    // serve --ban-time
  size_t max_pending = 64;  // checks waiting; more are skipped (counted)
  double call_timeout_s = 120;
};

// One generation as the checks see it: the prompt, then each step's token
// and the workers that made it.
class VerifyTrack {
 public:
  VerifyTrack(ServedModel& model, nlohmann::json sample, std::vector<int32_t> prompt, uint64_t sketch_seed);
  ~VerifyTrack();  // frees the verifier's session

  // Step `step` (0 = the prefill) returned `token`, made by `workers` (its
  // stages' workers, running the layer ranges `ranges`; the last drew the
  // token).
  void claim(int64_t step, int32_t token, std::vector<std::shared_ptr<RemoteWorker>> workers,
             std::vector<std::pair<int64_t, int64_t>> ranges);
  // A pipeline stage's output `name` at the boundary before layer
  // `boundary`, rows for positions first_pos...: kept as sketches (a few
  // projections on secret random signs, and the norm) so a wrong token can
  // be pinned on the stage that made it.
  void record_carry(int64_t boundary, const std::string& name, int64_t first_pos, const Tensor& rows);
  // How the generation cut its prompt into prefill calls (known after
  // step 0): a check feeds it the same way, so it computes the same numbers.
  void prompt_chunks(std::vector<int64_t> chunks);
  // A check corrected the step's token (a verify-all request).
  void correct(int64_t step, int32_t token);
  int64_t steps() const;
  // For the response: steps checked and passed, checks still waiting, and
  // whether a check found a wrong token.
  nlohmann::json summary() const;

 private:
  friend class Verifier;
  struct Claim {
    int32_t token;
    std::vector<std::shared_ptr<RemoteWorker>> workers;
    std::vector<std::pair<int64_t, int64_t>> ranges;
  };
  static constexpr int kSketch = 16;
  struct Sketch {
    std::array<float, kSketch> s{};
    float norm = 0;
  };
  Sketch sketch(const float* x, int64_t width) const;
  // The rule for int8 activations (WorkerInfo::int8_rows) of the worker
  // that computed position `pos` in its stage holding layer `layer`. For a
  // prompt position: the worker that computed position `last`, the end of
  // the checked window (a failover's replay computed the prompt again on
  // the new worker). Empty if unknown.
  std::string int8_rows_at(int64_t pos, int64_t last, int64_t layer) const;
  std::map<std::tuple<int64_t, std::string, int64_t>, Sketch> sketches_;  // (boundary, name, position)
  ServedModel& model_;
  nlohmann::json sample_;
  std::vector<int32_t> prompt_;
  uint64_t sketch_seed_;  // the verifier's secret signs
  mutable std::mutex mu_;   // claims_ and the counters
  std::mutex check_mu_;     // one check at a time per generation
  std::vector<Claim> claims_;
  std::vector<int64_t> chunks_;  // the prompt's prefill calls
  // The verifier's session: its worker, id, and the positions it holds.
  std::shared_ptr<RemoteWorker> verifier_;
  std::string session_;
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // the session's layer ranges (a pipeline's)
  int64_t pos_ = 0;
  void free_verifier();
  int64_t next_step_ = 0;  // the first step no check has covered
  int64_t verified_ = 0, pending_ = 0, inconclusive_ = 0;
  bool wrong_found_ = false;
};

class Verifier {
 public:
  Verifier(Coordinator& net, VerifyOptions options);
  ~Verifier();
  const VerifyOptions& options() const { return options_; }
  uint64_t sketch_seed() const { return sketch_seed_; }  // secret, like the coin

  // Whether this step starts a check (the secret coin).
  bool due();
  // Queues a check of the track's steps up to `step`; skipped (and counted)
  // when max_pending checks already wait.
  void check_later(std::shared_ptr<VerifyTrack> track, int64_t step);

  enum class Result { Passed, Inconclusive, Caught };
  struct Outcome {
    Result result = Result::Passed;
    int64_t step = -1;    // Caught: the first wrong step; Inconclusive: the step nobody could decide
    int32_t token = -1;   // ... and the token it should have been
    std::string detail;   // for the log and the response
  };
  // Checks the track's steps up to `step` now (on the caller's thread).
  Outcome check_now(VerifyTrack& track, int64_t step);

  // Counters for /metrics and the web page: checks passed, failed,
  // inconclusive, skipped; workers banned; steps that passed; tokens a
  // verifier drew otherwise than the worker (before any referee), and near
  // ties forgiven (net/token_check.h).
  nlohmann::json stats() const;

 private:
  struct Job {
    std::shared_ptr<VerifyTrack> track;
    int64_t step;
  };
  void loop();
  // Another worker that holds the model and can run it whole, not in
  // `exclude`; the coordinator's own worker first, then the most trusted.
  std::shared_ptr<RemoteWorker> pick(ServedModel& m, const std::set<std::string>& exclude) const;
  // Runs tokens[from, to) of the track's generation on `w`'s session from
  // position `from` (a prompt chunk's start, or past the prompt), and
  // returns the logits of positions [keep_from, to) ([rows, V]); keep_from
  // is at least the prompt's last position.
  // With `ranges` (a pipeline's layer ranges) it runs one session per range
  // (session + ".i") and hands each boundary's values to `on_carry`.
  using CarryFn = std::function<void(int64_t boundary, const std::string& name, int64_t first_pos, const Tensor& rows)>;
  std::vector<float> run_window(VerifyTrack& t, RemoteWorker& w, const std::string& session,
                                const std::vector<int32_t>& tokens, int64_t from, int64_t to, int64_t keep_from,
                                const std::vector<std::pair<int64_t, int64_t>>& ranges = {},
                                const CarryFn& on_carry = nullptr);
  // A referee's recomputation of the prefix that step `step` drew from, in
  // fresh sessions on a worker not in `exclude` (with `ranges`, one per
  // layer range, each boundary handed to `on_carry`): the logits of its last
  // position and the ids fed. No checker when none can run it; throws what
  // the calls throw.
  struct Recomputed {
    std::shared_ptr<RemoteWorker> checker;
    std::vector<float> logits;
    std::vector<int32_t> history;
  };
  Recomputed recompute(VerifyTrack& t, int64_t step, const std::set<std::string>& exclude,
                       const std::vector<std::pair<int64_t, int64_t>>& ranges = {}, const CarryFn& on_carry = nullptr);
  // The referee's draw for one step, from a fresh session; -1 when it could not.
  Outcome referee(VerifyTrack& t, int64_t step, int32_t verifier_token, const std::set<std::string>& exclude);
  void convict(RemoteWorker& w, const std::string& why);
  // A pipeline's wrong step `bad`: recomputes its prefix stage by stage on
  // a checker not in `exclude` and finds the first (position, boundary)
  // whose recorded sketch is off by more than kCarryTolerance of the value's
  // norm: that stage's worker lied. None off: the last stage did. Null
  // when no checker can run it.
  // Null with `unavailable` false: the generation was right (the verifier
  // was wrong).
  std::shared_ptr<RemoteWorker> attribute(VerifyTrack& t, int64_t bad, const std::set<std::string>& exclude,
                                          std::string* why, bool* unavailable);
  // A stage output that a recomputation contradicts: where, and by how much.
  struct Deviation {
    int64_t pos = -1, boundary = 0;
    double rel = 0;
  };
  // Compares each row handed to it with the track's sketch of the same
  // value and keeps the first (position, boundary) that is off in `off`.
  static CarryFn compare_carries(VerifyTrack& t, Deviation* off);

  Coordinator& net_;
  VerifyOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  bool running_ = false;  // a check is in progress
  std::mt19937_64 coin_;
  uint64_t sketch_seed_ = 0;
  int64_t passed_ = 0, failed_ = 0, inconclusive_ = 0, skipped_ = 0, banned_ = 0;
  int64_t steps_passed_ = 0, disagreements_ = 0, near_ties_ = 0;
  std::string last_disagreement_;  // for the operator: what the latest one was
  std::thread thread_;
};

}  // namespace bonfire::net
