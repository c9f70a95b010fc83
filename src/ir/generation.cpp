#include "ir/generation.h"

#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/json_parse.h"
#include "core/file.h"
#include "graph/executor.h"
#include "graph/profile.h"
#include "model/family.h"
#include "ir/ir_doc.h"
#include "ir/lower.h"
#include "ir/validate.h"
#include "ops/gemm.h"

namespace bonfire::ir {

namespace fs = std::filesystem;

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

json sample_params(const SamplingParams& s) {
  json p = {{"temperature", s.temperature}, {"seed", s.seed}};
  if (s.top_k > 0) p["topK"] = s.top_k;
  if (s.top_p < 1) p["topP"] = s.top_p;
  if (s.repetition_penalty != 1) p["repetitionPenalty"] = s.repetition_penalty;
  if (s.presence_penalty != 0) p["presencePenalty"] = s.presence_penalty;
  if (p.contains("repetitionPenalty") || p.contains("presencePenalty")) p["penaltyWindow"] = s.penalty_window;
  return p;
}

namespace {

// Text that is final: everything except a tail that could still grow into
// one of the stop strings.
size_t safe_length(const std::string& text, const std::vector<std::string>& stop) {
  size_t hold = 0;
  for (const auto& s : stop)
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k)
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return text.size() - hold;
}

// Weights the ops read only as f32 (the row slice of a learned position
// table, a depthwise conv kernel) get an f32 copy when the file packs them.
void unpack_small_weights(const json& doc, WeightStore& weights) {
  const int64_t layers = doc["model"]["n_layers"].get<int64_t>();
  for (const char* section : {"embed", "block", "head"})
    for (const auto& node : doc[section]["nodes"]) {
      const std::string op = node.value("op", "");
      if ((op != "pos_embedding" && op != "conv1d_causal") || !node.contains("weight")) continue;
      for (int64_t l = 0; l < (std::string(section) == "block" ? layers : 1); ++l) {
        const std::string name = weight_name(node["weight"].get<std::string>(), l);
        const Tensor* t = weights.find(name);
        if (t && t->dtype != DType::F32) weights.put(name, to_f32(*t), "f32 copy");
      }
    }
}

}  // namespace

json ir_for_model(const ModelFiles& files) {
  const fs::path own = fs::path(files.path()) / "bonfire.ir.json";
  if (!files.is_gguf() && fs::exists(own)) {
    return parse_json_file(own.string());
  }
  return family_document(files.config());
}

json GenerateResult::to_json(const std::string& model) const {
  const double decode_tps = decode_ms > 0 ? (tokens.size() > 1 ? (tokens.size() - 1) * 1000.0 / decode_ms : 0) : 0;
  return {{"model", model},
          {"text", text},
          {"tokens", tokens},
          {"promptTokens", prompt_tokens},
          {"finishReason", finish_reason},
          {"timings",
           {{"prefillMs", prefill_ms},
            {"decodeMs", decode_ms},
            {"prefillTokensPerSecond", prefill_ms > 0 ? prompt_tokens * 1000.0 / prefill_ms : 0},
            {"decodeTokensPerSecond", decode_tps}}}};
}

std::unique_ptr<LocalModel> LocalModel::open(const std::string& path, const Options& options) {
  std::unique_ptr<LocalModel> m(new LocalModel());
  m->files_ = ModelFiles::open(path);
  m->config_ = m->files_->config();
  m->compute_ = options.compute;
  const bool warmed = options.compute && m->files_->warm();
  m->weights_ = m->files_->weights(/*lowering_only=*/!options.compute);
  // The first step should cost what later ones do (issue 14): no page
  // faults on the weights, so they are mapped in now.
  // q8_0 matrices also get the layout the int8 kernel streams best.
  if (warmed) {
    m->weights_.repack_for_cpu();
    m->weights_.map_in();
  }
  if (options.tokenizer) m->tokenizer_ = m->files_->tokenizer();
  if (!options.ir_file.empty()) {
    m->ir_ = parse_json_file(options.ir_file);
  } else {
    m->ir_ = ir_for_model(*m->files_);
  }
  // A document that fails the schema or a rule, or a checkpoint missing a
  // tensor it names, is refused here, before anything runs.
  require_valid_ir(m->ir_, &m->weights_, options.ir_file.empty() ? path + " (its IR)" : options.ir_file);
  unpack_small_weights(m->ir_, m->weights_);
  if (options.widen_half)
    for (const std::string& name : m->weights_.names()) {
      const Tensor* t = m->weights_.find(name);
      if (t->dtype == DType::F16 || t->dtype == DType::BF16) m->weights_.put(name, to_f32(*t), "widened to f32");
    }
  const int64_t model_ctx = m->ir_["model"]["ctx"].get<int64_t>();
  m->ctx_ = std::min(model_ctx, options.ctx > 0 ? options.ctx : model_ctx);
  // Stop ids: generation_config.json's eos (a list or one id), else the config's.
  const GenerationConfig gc = m->files_->generation_config();
  for (int64_t id : gc.eos_token_ids) m->eos_.push_back(static_cast<int32_t>(id));
  if (m->eos_.empty())
    for (int64_t id : m->config_.eos_token_ids) m->eos_.push_back(static_cast<int32_t>(id));
  if (m->eos_.empty() && m->tokenizer_) m->eos_ = m->tokenizer_->eos_ids();
  m->limits_.max_total_bytes = int64_t(64) << 30;
  if (warmed && options.warm_up) m->warm_up();
  return m;
}

void LocalModel::warm_up() {
  GenerateRequest r;
  const int64_t n = std::min<int64_t>(8, ctx_ - 2);
  if (n < 1) return;
  r.prompt.assign(static_cast<size_t>(n), 0);
  r.max_tokens = 2;
  r.ignore_eos = true;
  try {
    generate(r);
  } catch (const std::exception&) {
    // A model this cannot run fails its first real call with the error.
  }
}

const Tokenizer& LocalModel::tokenizer() const {
  if (!tokenizer_) throw Error(ErrorCode::Internal, "this model was opened for graphs only, without its tokenizer");
  return *tokenizer_;
}

std::vector<int32_t> LocalModel::encode_prompt(const std::string& text) const { return tokenizer().encode(text, true); }

const Call& LocalModel::step(const std::string& mode, int64_t tokens, const SamplingParams* sampling, bool logits,
                             bool all_logits) {
  LowerOptions o;
  o.mode = mode;
  o.tokens = tokens;
  o.ctx = ctx_;
  o.logits = logits;
  o.all_logits = all_logits;
  if (sampling) o.sample = sample_params(*sampling);
  const std::string key = mode + "/" + std::to_string(tokens) + "/" + o.sample.dump() + "/" + std::to_string(logits) +
                          std::to_string(all_logits);
  auto it = steps_.find(key);
  if (it != steps_.end()) return it->second;
  if (steps_.size() > 64) steps_.clear();  // prompts of many lengths: keep the cache small
  json call = lower(ir_, o, &weights_);
  // The call's shape as the protocol sends it; run() passes the real ids.
  call["inputs"] = {{"tokens", {{"shape", {tokens}}, {"data", std::vector<float>(tokens, 0.f)}}}};
  call["session"] = "local";
  return steps_.emplace(key, Call::parse(call, limits_)).first->second;
}

std::map<std::string, Tensor> LocalModel::run(const Call& call, const std::vector<int32_t>& tokens, int64_t pos,
                                              int64_t step, Session& session) {
  Tensor ids = Tensor::empty({static_cast<int64_t>(tokens.size())});
  for (size_t i = 0; i < tokens.size(); ++i) ids.f32()[i] = static_cast<float>(tokens[i]);
  const std::map<std::string, Tensor> inputs = {{"tokens", ids}};
  const WeightLookup lookup = [&](const std::string& name) -> const Tensor* {
    auto it = call.weights.find(name);
    return it != call.weights.end() ? &it->second : weights_.find(name);
  };
  const Int8Scope int8;  // a generation step: int8 activations where the mode allows
  return run_graph(call.graph, inputs, json{{"pos", pos}, {"step", step}}, lookup, &session, limits_).outputs;
}

TextModel LocalModel::text_model() const {
  return TextModel{&tokenizer(), eos_, ctx_, ir_["model"]["vocab"].get<int64_t>()};
}

void LocalModel::require_compute() const {
  if (!compute_)
    throw Error(ErrorCode::Internal, "this model was opened for lowering only (its weights were not loaded to run)");
}

GenerateResult LocalModel::generate(const GenerateRequest& req, const TokenCallback& on_token) {
  require_compute();
  Session session;
  const Call* decode = nullptr;
  std::vector<float> prompt_logits;
  auto result = generate_loop(
      text_model(), req,
      [&](const std::vector<int32_t>& tokens, int64_t pos, int64_t step_index) {
        if (step_index == 0) {
          auto out = run(step("prefill", static_cast<int64_t>(tokens.size()), &req.sampling, req.return_logits, false),
                         tokens, pos, 0, session);
          if (req.return_logits) {
            const Tensor& l = out.at("logits");
            prompt_logits.assign(l.f32(), l.f32() + l.numel());
          }
          return static_cast<int32_t>(out.at("token").f32()[0]);
        }
        if (!decode) decode = &step("decode", 1, &req.sampling, false, false);
        return static_cast<int32_t>(run(*decode, tokens, pos, step_index, session).at("token").f32()[0]);
      },
      on_token);
  result.prompt_logits = std::move(prompt_logits);
  return result;
}

GenerateResult generate_loop(const TextModel& model, const GenerateRequest& req, const StepFn& run_step,
                             const TokenCallback& on_token) {
  const int64_t n = static_cast<int64_t>(req.prompt.size());
  const int64_t ctx = model.ctx;
  if (n == 0) throw Error(ErrorCode::BadGraph, "the prompt is empty");
  if (n >= ctx)
    throw Error(ErrorCode::TooLarge, "the prompt has " + std::to_string(n) + " tokens; the context holds " +
                                         std::to_string(ctx) + " (prompt plus at least one generated token)");
  for (int32_t id : req.prompt)
    if (id < 0 || id >= model.vocab)
      throw Error(ErrorCode::BadGraph, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                           std::to_string(model.vocab) + ")");
  GenerateResult r;
  r.prompt_tokens = n;
  r.finish_reason = "length";
  const int64_t max_tokens = std::min<int64_t>(std::max<int64_t>(req.max_tokens, 0), ctx - n);
  if (max_tokens == 0) return r;

  const Tokenizer& tok = *model.tokenizer;
  auto detok = tok.stream(true);
  std::string pending;  // text not yet passed to on_token
  auto t0 = std::chrono::steady_clock::now();
  set_profile_phase("prefill");
  int32_t id = run_step(req.prompt, 0, 0);
  r.prefill_ms = ms_since(t0);
  set_profile_phase("decode");
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0;; ++i) {
    if (!req.ignore_eos && std::find(model.eos.begin(), model.eos.end(), id) != model.eos.end()) {
      r.finish_reason = "eos";
      break;
    }
    r.tokens.push_back(id);
    // Ids past the tokenizer (a padded embedding) have no text.
    if (id < tok.vocab_size()) pending += detok.push(id);
    bool stopped = false;
    for (const auto& s : req.stop) {
      const size_t at = s.empty() ? std::string::npos : (r.text + pending).find(s);
      if (at != std::string::npos) {
        pending = (r.text + pending).substr(r.text.size(), at - std::min(at, r.text.size()));
        stopped = true;
      }
    }
    const size_t safe = stopped ? pending.size() : safe_length(pending, req.stop);
    const std::string piece = pending.substr(0, safe);
    pending.erase(0, safe);
    r.text += piece;
    if (on_token && !on_token(id, piece)) {
      r.finish_reason = "cancelled";
      break;
    }
    if (stopped) {
      r.finish_reason = "stop";
      pending.clear();
      break;
    }
    if (static_cast<int64_t>(r.tokens.size()) >= max_tokens) break;
    id = run_step({id}, n + i, i + 1);
  }
  r.decode_ms = ms_since(t0);
  if (r.finish_reason != "stop") r.text += pending + detok.flush();
  return r;
}

std::vector<float> LocalModel::all_logits(const std::vector<int32_t>& tokens) {
  require_compute();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n > ctx_)
    throw Error(ErrorCode::TooLarge, std::to_string(n) + " tokens do not fit the context of " + std::to_string(ctx_));
  Session session;
  auto out = run(step("prefill", n, nullptr, true, true), tokens, 0, 0, session);
  const Tensor& l = out.at("logits");
  return std::vector<float>(l.f32(), l.f32() + l.numel());
}

}  // namespace bonfire::ir
