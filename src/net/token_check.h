// Whether a worker's sampled token agrees with a recomputation of the same
// step (docs/NETWORK.md "Checking workers"). The recomputation runs the same
// model on another worker, possibly another SIMD target and another kernel
// shape (a verifier runs the step inside a prefill), so its logits equal
// the worker's only up to f32 reassociation. A token that differs is judged
// against that bound: if some logits within the bound of the recomputed
// ones make the draw give the claimed token, the step was a near tie and
// nobody is blamed. For a greedy step that test is exact; for a sampled one
// it tries the ways drift changes a draw (token_check.cpp), not every
// possible perturbation.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace bonfire::net {

// How far an honest recomputation's logits may be from the worker's: an
// absolute bound of kLogitTolerance × (1 + the row's largest |logit|).
// Measured drift between the decode and prefill paths and between SIMD
// targets is below 1e-4 of that scale (docs/NETWORK.md); 2e-3 leaves a
// margin of 20×.
inline constexpr double kLogitTolerance = 2e-3;
// That bound for one row of V logits: kLogitTolerance × (1 + its largest
// finite |logit|).
inline double logit_tolerance(const float* row, int64_t V) {
  float largest = 0;
  for (int64_t i = 0; i < V; ++i)
    if (std::isfinite(row[i])) largest = std::max(largest, std::fabs(row[i]));
  return kLogitTolerance * (1.0 + largest);
}

enum class TokenAgreement { Same, NearTie, Differs };

struct TokenVerdict {
  TokenAgreement agreement = TokenAgreement::Same;
  int32_t token = -1;  // what the recomputation draws
  double gap = 0;      // its logit minus the claimed token's
};

// Draws the token of decode step `step` from `logits` (one row of V) with
// the request's sampling params (`sample`: temperature, topK, topP, seed,
// penalties; as the sample op takes them), the ids seen so far (`history`,
// for penalties), and compares it with `claimed`.
TokenVerdict check_token(const float* logits, int64_t V, const nlohmann::json& sample, uint64_t step,
                         const std::vector<int32_t>& history, int32_t claimed);

}  // namespace bonfire::net
