#include "ir/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace bonfire::ir {

json PerplexityResult::to_json() const {
  return {{"tokens", tokens}, {"predicted", predicted}, {"windows", windows}, {"ctx", ctx},
          {"nll_sum", nll_sum}, {"perplexity", perplexity}, {"seconds", seconds}};
}

std::vector<int32_t> perplexity_tokens(const LocalModel& model, const std::string& text) {
  std::vector<int32_t> ids;
  int32_t bos = model.tokenizer().bos_id();
  if (bos < 0 && model.config().bos_token_id >= 0) bos = static_cast<int32_t>(model.config().bos_token_id);
  if (bos >= 0) ids.push_back(bos);
  const std::vector<int32_t> body = model.tokenizer().encode(text, false);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

PerplexityResult perplexity(LocalModel& model, const std::vector<int32_t>& tokens, int64_t ctx,
                            const std::function<void(int64_t, int64_t)>& on_window) {
  if (ctx < 2 || ctx > model.ctx())
    throw Error(ErrorCode::BadGraph, "perplexity window of " + std::to_string(ctx) +
                                         " tokens: it must be between 2 and the context, " + std::to_string(model.ctx()));
  const auto start = std::chrono::steady_clock::now();
  PerplexityResult r;
  r.ctx = ctx;
  r.tokens = static_cast<int64_t>(tokens.size());
  const int64_t total_windows = (r.tokens + ctx - 1) / ctx;
  const int64_t vocab = model.ir()["model"]["vocab"].get<int64_t>();
  for (int64_t w = 0; w < total_windows; ++w) {
    const int64_t begin = w * ctx, n = std::min(ctx, r.tokens - begin);
    if (n < 2) break;
    const std::vector<int32_t> window(tokens.begin() + begin, tokens.begin() + begin + n);
    const std::vector<float> logits = model.all_logits(window);
    for (int64_t i = 0; i + 1 < n; ++i) {
      // -log softmax(row)[next], in double so long texts sum without drift.
      const float* row = logits.data() + i * vocab;
      double mx = row[0];
      for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      const int32_t next = window[i + 1];
      if (!std::isfinite(row[next]))
        throw Error(ErrorCode::Internal, "the logit of token " + std::to_string(next) + " at position " +
                                             std::to_string(begin + i) + " is not finite");
      r.nll_sum += std::log(sum) + mx - static_cast<double>(row[next]);
      ++r.predicted;
    }
    ++r.windows;
    if (on_window) on_window(w + 1, total_windows);
  }
  if (r.predicted == 0) throw Error(ErrorCode::BadGraph, "the text gives fewer than 2 tokens: nothing to score");
  r.perplexity = std::exp(r.nll_sum / static_cast<double>(r.predicted));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace bonfire::ir
