// Perplexity of a model on a text, through the same lowered prefill graphs
// generation uses. The protocol (models/demo/eval.json records the same for
// the PyTorch evaluation in tools/train_demo.py): the token stream is the
// text's ids with BOS prepended once (when the model has one); it is cut
// into consecutive windows of `ctx` tokens, each run from position 0 with a
// fresh cache; every token but a window's first is predicted from the ones
// before it in its window. Perplexity = exp(sum of NLL / predicted tokens).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ir/generation.h"

namespace bonfire::ir {

struct PerplexityResult {
  int64_t tokens = 0;     // in the stream, BOS included
  int64_t predicted = 0;  // tokens scored
  int64_t windows = 0;
  int64_t ctx = 0;
  double nll_sum = 0;     // natural log
  double perplexity = 0;
  double seconds = 0;
  json to_json() const;
};

// Scores `tokens` as above; windows of fewer than 2 tokens are dropped.
// on_window(done, total) after each window. Throws Error when ctx is not
// in [2, the model's context] or nothing can be scored.
PerplexityResult perplexity(LocalModel& model, const std::vector<int32_t>& tokens, int64_t ctx,
                            const std::function<void(int64_t, int64_t)>& on_window = nullptr);

// The stream the protocol scores: BOS (if the model's tokenizer config has
// one) followed by the text's ids, no other special tokens.
std::vector<int32_t> perplexity_tokens(const LocalModel& model, const std::string& text);

}  // namespace bonfire::ir
