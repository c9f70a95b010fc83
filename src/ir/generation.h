// Text generation on one machine: model files → IR → lowered step graphs →
// the engine. The prefill is one graph over the whole prompt; each decode
// step re-runs one parsed graph with a new bind ({"pos", "step"}). Tokens
// are chosen on the device by the graph's `sample` op, keyed on (seed,
// step), so the same request gives the same tokens wherever it runs.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/limits.h"
#include "graph/session.h"
#include "model/model_files.h"

namespace bonfire::ir {

using nlohmann::json;

struct SamplingParams {
  double temperature = 0;  // 0: the most likely token
  int64_t top_k = 0;
  double top_p = 1;
  double seed = 0;
  double repetition_penalty = 1;
  double presence_penalty = 0;
  int64_t penalty_window = 64;

  // top_p as clients give it, in [0, 1]: 0 keeps only the most likely token,
  // which the sampler (top_p in (0, 1]) takes as top_k 1. Set after top_k.
  void set_top_p(double p) {
    top_p = p == 0 ? 1 : p;
    if (p == 0) top_k = 1;
  }
};

// The `sample` op's params for these settings (defaults left out).
json sample_params(const SamplingParams& s);

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, used as given
  int64_t max_tokens = 64;
  SamplingParams sampling;
  std::vector<std::string> stop;  // the text ends before the first one that appears
  bool ignore_eos = false;
  bool return_logits = false;  // keep the logits of the last prompt position
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated, without a final eos
  std::string text;
  int64_t prompt_tokens = 0;
  std::string finish_reason;  // "length", "stop" or "eos"
  double prefill_ms = 0, decode_ms = 0;
  std::vector<float> prompt_logits;  // with return_logits
  json to_json(const std::string& model) const;  // the /api/v3/generate response
};

// Called for every generated token with the text that became final; false
// cancels the generation.
using TokenCallback = std::function<bool(int32_t id, const std::string& text)>;

// What the generation loop needs of a model besides running it.
struct TextModel {
  const Tokenizer* tokenizer = nullptr;
  std::vector<int32_t> eos;
  int64_t ctx = 0;
  int64_t vocab = 0;
};

// Runs one step and returns the token the graph sampled: the prefill (step
// 0: `tokens` is the prompt at pos 0), then decode steps (one token at
// pos, RNG step `step`). Local and remote runs share the loop below.
using StepFn = std::function<int32_t(const std::vector<int32_t>& tokens, int64_t pos, int64_t step)>;

// The request's checks (empty prompt, context, vocabulary), then prefill and
// decode steps until eos, a stop string, max_tokens or the context's end;
// the text is detokenized as it becomes final. Throws Error before the
// first step for a bad request.
GenerateResult generate_loop(const TextModel& model, const GenerateRequest& request, const StepFn& step,
                             const TokenCallback& on_token);

class LocalModel {
 public:
  struct Options {
    int64_t ctx = 4096;        // the session's context, capped at the model's
    std::string ir_file;       // a document to use instead of the model's
    bool tokenizer = true;     // false: graphs only (a worker); text calls throw
    // f16/bf16 weights widened to f32 at load: twice the memory, for a
    // machine without a half-precision conversion instruction (WebAssembly),
    // where the products then run several times faster.
    bool widen_half = false;
    // One throwaway short generation at load when the weights were mapped
    // in (warm_up below), so the first real call costs what later ones do.
    bool warm_up = true;
    // false: for lowering only (a coordinator, which sends the steps to
    // workers): the IR, the tokenizer and the weights' shapes. The weight
    // files are mapped but not read: nothing is repacked or paged in, there
    // is no warm-up, and generate() and all_logits() refuse. Otherwise
    // `bonfire serve` would hold every weight twice, its own worker's copy
    // and this one.
    bool compute = true;
  };
  // Opens the files, checks the IR (schema and rules) against the weights.
  // Throws Error naming what is wrong.
  static std::unique_ptr<LocalModel> open(const std::string& path, const Options& options);

  const json& ir() const { return ir_; }
  const Tokenizer& tokenizer() const;  // throws when opened with tokenizer = false
  const ModelConfig& config() const { return config_; }
  const WeightStore& weights() const { return weights_; }
  int64_t ctx() const { return ctx_; }
  const std::vector<int32_t>& eos_ids() const { return eos_; }
  const ModelFiles& files() const { return *files_; }
  TextModel text_model() const;
  // The prompt ids for `text` as the model's tokenizer config says (BOS...).
  std::vector<int32_t> encode_prompt(const std::string& text) const;

  // Prompts longer than the context (minus one position to generate) are
  // refused with too_large; max_tokens is cut to what the context holds.
  // Both calls below throw Internal on a model opened with compute = false.
  GenerateResult generate(const GenerateRequest& request, const TokenCallback& on_token = nullptr);

  // Logits of every position of `tokens` ([T, vocab], row-major), one
  // prefill graph (perplexity, tests).
  std::vector<float> all_logits(const std::vector<int32_t>& tokens);

 private:
  LocalModel() = default;
  // An 8-token prefill and one decode step, thrown away: the first real call
  // then finds its step graphs lowered and its buffers' pages faulted in
  // (under some hypervisors a fresh page's first touch costs microseconds,
  // and a step allocates megabytes). Failures are left to the real call.
  void warm_up();
  void require_compute() const;
  // The parsed graph for a step, lowered on first use.
  const Call& step(const std::string& mode, int64_t tokens, const SamplingParams* sampling, bool logits,
                   bool all_logits);
  std::map<std::string, Tensor> run(const Call& call, const std::vector<int32_t>& tokens, int64_t pos, int64_t step,
                                    Session& session);

  std::unique_ptr<ModelFiles> files_;
  ModelConfig config_;
  WeightStore weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  json ir_;
  int64_t ctx_ = 0;
  std::vector<int32_t> eos_;
  Limits limits_;
  std::map<std::string, Call> steps_;
  bool compute_ = true;
};

// The IR document for the model at `path`: its own bonfire.ir.json when the
// folder has one, else the family module's document for its config.
json ir_for_model(const ModelFiles& files);

}  // namespace bonfire::ir
