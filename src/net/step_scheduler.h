// Continuous batching (docs/NETWORK.md "The step scheduler"). Every step a
// generation sends to a worker goes through the scheduler of that worker's
// stage (worker, model, layer range). There:
// - Decode steps of one token wait briefly for the other sequences decoding
//   on the stage and go as one batched call (graph/batch.h), up to
//   max_batch rows; the rest queue for the next call. Sequences join and
//   leave between any two steps.
// - Other steps (a prompt's prefill, cut into chunks by the caller) go alone,
//   taking turns with the decode batches, so a long prompt never stalls the
//   streams for longer than one chunk.
// - One call per stage is in flight at a time: the worker runs its steps one
//   after another anyway, and the rows that arrive meanwhile form the next
//   batch.
// A batched call that fails fails every row in it; each sequence then fails
// over on its own (served_generation.cpp), and sends its next step alone so
// that one bad row cannot keep failing the others.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "net/coordinator.h"

namespace bonfire::net {

struct SchedulerOptions {
  int max_batch = 8;        // rows in one batched call
  double gather_ms = 5;     // how long a stage waits for its sequences' next steps after a call
  int64_t max_chunk = 512;  // prompt tokens in one prefill call
};

// One sequence's step on one stage.
struct StepCall {
  std::shared_ptr<RemoteWorker> worker;
  std::string model, session;
  std::string graph_key;                         // registered decode graphs: rows batch by key
  std::shared_ptr<const nlohmann::json> call;    // the graph, for a worker that has not registered it
  const std::set<std::string>* outputs = nullptr;  // what the reply may carry
  nlohmann::json bind;
  std::map<std::string, Tensor> inputs;  // by wire name ("in:tokens"), this row's only
  int64_t tokens = 1;
  int64_t bytes = 0;       // the stage's weights: a decode call's speed is bytes / its round trip
  bool batchable = false;  // a one-token decode step of a registered graph
  bool alone = false;      // go in a call of its own (after a failed batch)
  // A checker's call: every row as its one-token step computes it, and the
  // rule for int8 activations its products follow ("none", "few", "any":
  // the checked worker's; empty: the worker's own). docs/PROTOCOL-EXTENSIONS.md.
  bool step_numerics = false;
  std::string int8_rows;
};

class StepScheduler {
 public:
  explicit StepScheduler(SchedulerOptions options) : options_(options) {}

  // The stage a step runs on: its worker, model and layer range.
  static std::string stage_key(const RemoteWorker& w, const std::string& model, int64_t first, int64_t end);

  // Runs the step (batched with others when it can) and returns its reply,
  // whose tensors are this row's only. Throws what the call throws.
  Message run(const std::string& stage, StepCall& step, double timeout_s);

  // A sequence decoding on a stage: while a Member lives, the stage's
  // batches wait (up to gather_ms) for its next step.
  class Member {
   public:
    Member() = default;
    Member(StepScheduler* s, std::string stage);
    Member(Member&& o) noexcept;
    Member& operator=(Member&& o) noexcept;
    ~Member();

   private:
    void leave();
    StepScheduler* s_ = nullptr;
    std::string stage_;
  };
  Member join(const std::string& stage) { return Member(this, stage); }

  // Prompt tokens for the next prefill call on the stage: while sequences
  // decode there, a chunk sized to take about one decode batch's time
  // (next_chunk, from the last chunk's time); else max_chunk.
  int64_t prefill_chunk(const std::string& stage);

  // The chunk after one of `chunk` tokens that took `chunk_ms` while a
  // decode batch takes `decode_ms`: a chunk cost is mostly reading the
  // weights once, like a batch, so it is not proportional to its tokens.
  // Doubles when the chunk took under 3/4 of a batch's time, halves when it
  // took over 5/4; powers of two from 8 to max_chunk.
  static int64_t next_chunk(int64_t chunk, double chunk_ms, double decode_ms, int64_t max_chunk);

  // Sequences decoding and steps waiting on the worker's stages.
  int load(const std::string& worker_id) const;

  // Per stage: sequences decoding, rows waiting, the last batch's size,
  // batched calls and rows so far (/metrics, the web page).
  nlohmann::json stats() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Pending {
    StepCall* step = nullptr;
    std::chrono::steady_clock::time_point since;
    bool done = false;
    Message reply;
    std::exception_ptr error;
  };
  struct Stage {
    int members = 0;
    std::deque<Pending*> decode, other;
    bool in_flight = false;
    std::chrono::steady_clock::time_point idle_since;  // when the last call ended
    bool last_was_other = false;
    int last_batch = 0;
    int64_t batches = 0, rows = 0;
    double decode_ms = 0;            // moving average of a batched call's round trip
    double gap_ms = 0;               // moving average of the idle time before a batched call
    double worker_ms = 0;            // moving average of the worker's own time for a batched call
    int64_t chunk = 8;  // prompt tokens in the next prefill call while sequences decode (next_chunk)
  };

  // Under mu_: the next call to send on `st`, or empty when none is ready;
  // `wake` is when a waiting row should look again.
  std::vector<Pending*> next_call(Stage& st, std::chrono::steady_clock::time_point now,
                                  std::chrono::steady_clock::time_point* wake);
  static Message call_message(const std::vector<Pending*>& rows);
  void send(Stage& st, const std::vector<Pending*>& rows, double timeout_s);

  SchedulerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Stage> stages_;
};

}  // namespace bonfire::net
