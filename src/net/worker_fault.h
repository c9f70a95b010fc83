// Test aids: a worker that lies or is slow (`bonfire worker --fault
// lie=P,slow=MS`, either or both). It is the real worker with a switch, so
// tests, and anyone auditing a network, can see how fast plausible wrong
// answers are caught (docs/NETWORK.md "Checking workers") and how placement
// treats a slow worker: `slow=MS` holds every graph call MS milliseconds
// before it runs. With `lie=P`, with probability P per call (per sequence of
// a batched call) the worker returns a result that no shape or range check
// can tell from a right one:
// - a call that samples a token returns the second-best token instead (the
//   best-scoring one that net/token_check.h's check, given the call's
//   sampling params, calls wrong rather than a near tie: a token honest drift
//   could explain is forgiven by design), for that sequence;
// - any other call (a pipeline stage's hidden state, a verifier's logits)
//   has every row of the sequence's f32 outputs moved by 1% of the row's
//   norm in a random direction.
// Each lie is logged on stderr ("fault: lied on call N: ..."), so a test can
// count what reached users.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace bonfire::net {

class WorkerFault {
 public:
  // `spec` is the text after --fault: "lie=P" (0 <= P <= 1) and/or
  // "slow=MS", joined by a comma. Throws Error(BadGraph) naming what is
  // wrong. `seed` fixes the coin (tests).
  WorkerFault(const std::string& spec, uint64_t seed);
  double slow_ms() const { return slow_ms_; }

  // Tosses the coin for each of a call's `sequences` (a batched call's rows,
  // each a sequence's step as a call of its own would be; thread-safe), and
  // returns those it lies on, if any.
  std::vector<int64_t> lie_now(int64_t sequences);

  // A token the graph samples, and the logits it is drawn from.
  struct Sampled {
    std::string token, logits;
    bool added = false;  // logits is not among the call's own outputs
    GraphNode node;       // the sample node, whose params the call's bind completes
  };
  // The graph to run for a call that lies: `g` with the logits of each
  // token it samples among its outputs, so the second-best token is known.
  static Graph with_sample_logits(const Graph& g, std::vector<Sampled>* sampled);

  // Makes the sequences `lying` (from lie_now) of `outputs` wrong as the
  // header says, and removes the logits that with_sample_logits added.
  // `binds` are the call's, one per sequence. Returns what it did, one
  // entry (a log line) per lie.
  std::vector<std::string> tell(std::map<std::string, Tensor>& outputs, const std::vector<Sampled>& sampled,
                                const std::vector<nlohmann::json>& binds, const std::vector<int64_t>& lying);

 private:
  double p_ = 0;
  double slow_ms_ = 0;
  std::mutex mu_;
  std::mt19937_64 rng_;
};

}  // namespace bonfire::net
