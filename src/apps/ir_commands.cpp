#include "apps/ir_commands.h"

#include <iostream>
#include <memory>

#include "apps/cli_util.h"
#include "apps/compute_options.h"
#include "core/error.h"
#include "core/json_parse.h"
#include "core/file.h"
#include "graph/profile.h"
#include "ir/generation.h"
#include "ir/kv_memory.h"
#include "ir/ir_doc.h"
#include "ir/lower.h"
#include "ir/perplexity.h"
#include "ir/validate.h"
#include "core/progress.h"
#include "model/model_files.h"

namespace bonfire {

using json = nlohmann::json;

namespace {

struct Options {
  std::string path, file, mode = "decode", model;
  int64_t tokens_n = 1, ctx = 0;
  bool all_logits = false;
  // generate
  std::string prompt, tokens, ir_file;
  int64_t max_tokens = 64, top_k = 0, penalty_window = 64;
  double temperature = 0, top_p = 1, seed = 0, repetition_penalty = 1, presence_penalty = 0;
  std::vector<std::string> stop;
  bool json_out = false, ignore_eos = false, profile = false;
  // perplexity
  std::string text_file;
  int64_t window = 0;
};

int from_hf(const Options& o) {
  return guarded([&] {
    // A config the module turns into a document its own rules refuse (an odd
    // head_dim under full rope) is refused here, not printed as a document.
    const json doc = ir::ir_for_model(*ModelFiles::open(o.path));
    ir::require_valid_ir(doc, nullptr, o.path);
    std::cout << ir::in_reading_order(doc).dump(2) << "\n";
  });
}

int lower(const Options& o) {
  return guarded([&] {
    if (o.mode == "decode" && o.tokens_n != 1)
      throw Error(ErrorCode::BadGraph, "--tokens " + std::to_string(o.tokens_n) +
                                           " is for a prefill step (--mode prefill); a decode step takes one token");
    const json doc = read_json_input(o.file);
    ir::LowerOptions lo;
    lo.mode = o.mode;
    lo.tokens = o.tokens_n;
    lo.ctx = o.ctx;
    lo.all_logits = o.all_logits;
    std::unique_ptr<ModelFiles> files;
    WeightStore store;
    if (!o.model.empty()) {
      files = ModelFiles::open(o.model);
      store = files->weights();
    }
    const WeightStore* weights = o.model.empty() ? nullptr : &store;
    ir::require_valid_ir(doc, weights, o.file);
    std::cout << ir::lower(doc, lo, weights).dump(1) << "\n";
  });
}

int generate(const Options& o) {
  return guarded([&] {
    if (o.prompt.empty() == o.tokens.empty()) throw Error(ErrorCode::BadGraph, "give --prompt TEXT or --tokens 1,2,3");
    ir::LocalModel::Options mo;
    if (o.ctx > 0) mo.ctx = o.ctx;
    mo.ir_file = o.ir_file;
    const std::string path = model_or_default(o.model);
    auto model = ir::LocalModel::open(path, mo);
    ir::GenerateRequest req;
    req.prompt = o.tokens.empty() ? model->encode_prompt(o.prompt) : parse_id_list(o.tokens, "--tokens");
    req.max_tokens = o.max_tokens;
    req.stop = o.stop;
    req.ignore_eos = o.ignore_eos;
    req.sampling = {o.temperature, o.top_k, o.top_p, o.seed, o.repetition_penalty, o.presence_penalty, o.penalty_window};
    req.sampling.set_top_p(o.top_p);
    ir::TokenCallback print;
    if (!o.json_out)
      print = [](int32_t, const std::string& piece) {
        std::cout << piece << std::flush;
        return true;
      };
    set_profiling(o.profile);
    const ir::GenerateResult r = model->generate(req, print);
    set_profiling(false);
    if (o.json_out) {
      std::cout << r.to_json(path).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    } else {
      std::cout << "\n";
      const json t = r.to_json(path)["timings"];
      // The prefill step samples the first token, so its time is the time to first token.
      char line[256];
      std::snprintf(line, sizeof line,
                    "%lld prompt tokens, %zu generated (%s) in %.2f s: time to first token %.1f ms, prefill %.1f "
                    "tokens/s, decode %.1f tokens/s\n",
                    static_cast<long long>(r.prompt_tokens), r.tokens.size(), r.finish_reason.c_str(),
                    (r.prefill_ms + r.decode_ms) / 1000.0, r.prefill_ms, t["prefillTokensPerSecond"].get<double>(),
                    t["decodeTokensPerSecond"].get<double>());
      std::cerr << line;
    }
    std::cerr << ir::kv_memory(model->ir(), model->ctx(), &model->weights()).summary() << "\n";
    if (o.profile) std::cerr << profile_report();
  });
}

int perplexity(const Options& o) {
  return guarded([&] {
    ir::LocalModel::Options mo;
    mo.ctx = o.window > 0 ? o.window : 512;  // capped at the model's own
    mo.ir_file = o.ir_file;
    const std::string path = model_or_default(o.model);
    auto model = ir::LocalModel::open(path, mo);
    const std::vector<int32_t> tokens = ir::perplexity_tokens(*model, read_file(o.text_file, kMaxTextFile));
    const int64_t window = o.window > 0 ? o.window : model->ctx();
    Progress progress("perplexity", (static_cast<int64_t>(tokens.size()) + window - 1) / window);
    const ir::PerplexityResult r =
        ir::perplexity(*model, tokens, window, [&](int64_t done, int64_t) { progress.set(done); });
    progress.finish();
    // PROTOCOL.md: the result as JSON on stdout; the summary for people on stderr.
    json j = r.to_json();
    j["model"] = path;
    j["file"] = o.text_file;
    std::cout << j.dump() << "\n";
    char line[256];
    std::snprintf(line, sizeof line, "perplexity %.4f over %lld predicted tokens (%lld windows of %lld), %.1f s, %.0f tokens/s\n",
                  r.perplexity, static_cast<long long>(r.predicted), static_cast<long long>(r.windows),
                  static_cast<long long>(r.ctx), r.seconds, static_cast<double>(r.tokens) / std::max(r.seconds, 1e-9));
    std::cerr << line;
  });
}

}  // namespace

std::function<int()> add_ir_commands(CLI::App& app, CLI::App& ir) {
  auto o = std::make_shared<Options>();
  auto* fh = ir.add_subcommand("from-hf", "an IR document for a Hugging Face folder (or GGUF file), on stdout");
  fh->add_option("path", o->path, "model folder, config.json's folder, or a .gguf file")->required();
  auto* lw = ir.add_subcommand("lower", "the protocol graph an IR document lowers to, on stdout");
  lw->add_option("file", o->file, "the IR document (- reads stdin)")->required();
  lw->add_option("--mode", o->mode, "prefill or decode (default decode)")->check(CLI::IsMember({"prefill", "decode"}));
  lw->add_option("--tokens", o->tokens_n, "tokens of a prefill step (default 1)")->check(CLI::PositiveNumber);
  lw->add_option("--ctx", o->ctx, "the session's context (default: the model's)")->check(CLI::PositiveNumber);
  lw->add_option("--model", o->model, "the checkpoint, for widths the document leaves open");
  lw->add_flag("--all-logits", o->all_logits, "return the logits of every position");

  auto* gen = app.add_subcommand("generate", "one-shot text generation in one process");
  gen->add_option("--model", o->model, "model folder or GGUF file (default: the demo model)");
  gen->add_option("--prompt", o->prompt, "text, tokenized as the model's tokenizer config says");
  gen->add_option("--tokens", o->tokens, "prompt token ids, used as given (no BOS added)");
  // The ranges /api/v3/generate takes (net/request_fields.cpp).
  gen->add_option("--max-tokens", o->max_tokens, "tokens to generate (default 64)")
      ->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}));
  gen->add_option("--temperature", o->temperature, "0 = greedy (default)")->check(finite_range(0, 2));
  gen->add_option("--top-k", o->top_k, "0 = off")->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}));
  gen->add_option("--top-p", o->top_p, "1 = off; 0 = only the most likely token")->check(finite_range(0, 1));
  gen->add_option("--seed", o->seed, "sampling seed");
  gen->add_option("--repetition-penalty", o->repetition_penalty, "1 = off")->check(finite_range(1e-9, 1e9));
  gen->add_option("--presence-penalty", o->presence_penalty, "0 = off")->check(finite_range(-2, 2));
  gen->add_option("--penalty-window", o->penalty_window, "tokens the penalties look back over (default 64)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  gen->add_option("--stop", o->stop, "stop strings (repeatable)");
  gen->add_option("--ctx", o->ctx, "context length (default: min(model, 4096))")->check(CLI::PositiveNumber);
  gen->add_option("--ir", o->ir_file, "an IR document to use instead of the model's");
  gen->add_flag("--ignore-eos", o->ignore_eos, "keep generating after an end-of-sequence token");
  gen->add_flag("--json", o->json_out, "print the /api/v3/generate response JSON");
  gen->add_flag("--profile", o->profile,
                "print time per op kind and GB/s per weight product on stderr (prefill and decode apart)");
  add_compute_options(*gen, true);

  auto* ppl = app.add_subcommand("perplexity", "a model's perplexity on a text file, through the lowered graphs");
  ppl->add_option("--model", o->model, "model folder or GGUF file (default: the demo model)");
  ppl->add_option("--file", o->text_file, "the text (UTF-8)")->required();
  ppl->add_option("--ctx", o->window, "tokens per window, each run from a fresh cache (default: min(512, model))")
      ->check(CLI::Range(int64_t{2}, int64_t{INT32_MAX}));
  ppl->add_option("--ir", o->ir_file, "an IR document to use instead of the model's");
  add_compute_options(*ppl, false);
  add_int8_everywhere_option(*ppl);

  return [o, fh, lw, gen, ppl]() -> int {
    if (*ppl) return perplexity(*o);
    if (*fh) return from_hf(*o);
    if (*lw) return lower(*o);
    if (*gen) return generate(*o);
    return -1;
  };
}

}  // namespace bonfire
