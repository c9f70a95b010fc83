// A model the coordinator serves over the network. The coordinator opens the
// files itself (tokenizer, chat template, IR, weight shapes for the lowering)
// but never runs them: each step's graph goes to workers holding the same
// files (by hash). A model too big for one worker is a pipeline of layer
// ranges, one stage per worker, each stage with its own session; the values
// crossing a boundary travel through the coordinator. A worker lost mid-
// generation is replaced and the session replayed (prompt, then every token
// fed so far, with the same graphs and RNG steps), so the tokens are those
// the undisturbed run gives.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ir/generation.h"
#include "model/chat_template/chat_template.h"
#include "net/coordinator.h"
#include "net/model_hash.h"
#include "net/placement.h"
#include "net/step_scheduler.h"

namespace bonfire::net {

struct ServeModelOptions {
  int64_t ctx = 4096;
  int stages = 0;               // force this many pipeline stages (0: by workers' memory)
  double call_timeout_s = 120;  // one step on one worker
  int max_failovers = 4;        // per generation
  SchedulerOptions scheduler;   // continuous batching (net/step_scheduler.h)
};

class Verifier;

// A session id no one can guess ("g" + 16 hex digits for a generation's).
std::string random_session_id(const std::string& prefix);

// What happened during one generation, for the response and the metrics.
struct GenerationTrace {
  int failovers = 0;
  std::vector<std::string> stage_workers;  // final placement, "w1:0-11"
  double first_token_ms = 0;
  // Decode steps, and the time the workers report running them (their reply's
  // `ms`): the rest of the decode time is what the network path adds.
  int64_t decode_steps = 0;
  double decode_worker_ms = 0;
  // Spot checks (net/verifier.h): how much of the generation was checked
  // when it ended; null when no check was asked or drawn.
  nlohmann::json verified;
};

// How a generation is checked: a verifier drawing spot checks, and whether
// the client asked for every step to be checked before it is released.
struct GenerationChecks {
  Verifier* verifier = nullptr;
  bool every_step = false;  // "verify": true
};

class ServedModel {
 public:
  static std::unique_ptr<ServedModel> open(const std::string& path, const ServeModelOptions& options);

  const std::string& id() const { return fingerprint_.id; }
  const ModelFingerprint& fingerprint() const { return fingerprint_; }
  const ir::LocalModel& local() const { return *local_; }
  int64_t n_layers() const { return n_layers_; }
  int64_t total_bytes() const;
  // The model's chat template with the generation prompt; Error when none.
  std::string apply_chat_template(const nlohmann::json& messages) const;
  bool has_chat_template() const { return chat_template_.has_value(); }
  nlohmann::json describe() const;  // one entry of /api/v3/models

  ir::GenerateResult generate(Coordinator& net, const ir::GenerateRequest& request, const ir::TokenCallback& on_token,
                              GenerationTrace* trace, GenerationChecks checks = {});

  // The lowered step graph for layers [first, end) (cached). `mode` is
  // "prefill" (allocates the session's caches), "continue" (a later chunk of
  // a prompt) or "decode" (one token); a checker's chunks (net/verifier.h)
  // are "verify-prefill"/"verify-continue" (logits of every position) and
  // "verify-last-prefill"/"verify-last-continue" (of the last). Decode graphs
  // also get a key under which workers keep them registered.
  struct StepGraph {
    nlohmann::json call;
    std::string key;
    std::set<std::string> ops, features;
    std::set<std::string> outputs;       // what a reply may carry
    std::vector<std::string> carry_out;  // outputs a non-last stage returns
  };
  // Shared: the cache may drop it while a generation still runs it.
  std::shared_ptr<const StepGraph> step_graph(int64_t first, int64_t end, const std::string& mode, int64_t tokens,
                                              const nlohmann::json& sample);
  // The bind values that carry a request's sampling settings (the `sample`
  // op's params) into the graphs step_graph lowers.
  static nlohmann::json sample_bind(const nlohmann::json& sample);
  static std::string sample_bind_name(const std::string& param);  // "seed" -> "sampleSeed"
  // What a stage over layers [first, end) holds: its layers' weights and
  // caches, and the embedding and head on the last stage. With
  // `weights_only`, its weights: what each of its decode steps reads.
  int64_t stage_bytes(int64_t first, int64_t end, bool weights_only = false) const;
  // What a session of layers [first, end) keeps on its worker: its caches
  // and states at the served context (what stage_bytes adds to the weights).
  int64_t stage_session_bytes(int64_t first, int64_t end) const {
    return stage_bytes(first, end) - stage_bytes(first, end, true);
  }
  // The layer ranges of a generation's pipeline on `workers` (the holders,
  // best first; `capacity` their memory), each range for workers[i % size]:
  // with --stages N, N ranges on the first N; otherwise on as few of the
  // first as hold the model in 90% of their memory. The bytes of each range
  // follow the workers' speeds (net/placement.h). Throws TooLarge when they
  // cannot hold it.
  std::vector<std::pair<int64_t, int64_t>> plan_stages(const std::vector<StageSlot>& workers) const;
  const ServeModelOptions& options() const { return options_; }
  StepScheduler& scheduler() { return *scheduler_; }

 private:
  ServedModel() = default;
  void measure_layers();

  ServeModelOptions options_;
  ModelFingerprint fingerprint_;
  std::unique_ptr<ir::LocalModel> local_;
  std::optional<ChatTemplate> chat_template_;
  nlohmann::ordered_json template_vars_;
  int64_t n_layers_ = 0;
  std::vector<int64_t> layer_bytes_;         // weights and state of each layer
  std::vector<int64_t> layer_weight_bytes_;  // weights of each layer
  int64_t edge_bytes_ = 0;            // embedding and head
  nlohmann::json kv_;                 // ir::kv_memory at the served context, for describe()
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const StepGraph>> graphs_;
  std::unique_ptr<StepScheduler> scheduler_;
};

}  // namespace bonfire::net
