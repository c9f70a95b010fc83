#include "net/token_check.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/op.h"

namespace bonfire::net {

namespace {

// The sample op itself, so the draw is the one a worker's graph makes.
int32_t draw(const std::vector<float>& row, const nlohmann::json& params, const std::vector<int32_t>& history) {
  static const OpDef* op = find_op("sample");
  Tensor logits = Tensor::empty({1, static_cast<int64_t>(row.size())});
  std::copy(row.begin(), row.end(), logits.f32());
  OpInputs in = {&logits};
  Tensor hist;
  if (params.contains("penaltyEnd")) {
    hist = Tensor::empty({static_cast<int64_t>(std::max<size_t>(history.size(), 1)), 1});
    for (size_t i = 0; i < history.size(); ++i) hist.f32()[i] = static_cast<float>(history[i]);
    in.push_back(&hist);
  }
  Tensor out = Tensor::empty({1});
  op->run(in, Params(params), out);
  return static_cast<int32_t>(out.f32()[0]);
}

// Whether some logits within the bound of `row` (every logit moved by at
// most logit_tolerance) make the draw give `claimed` instead of `drawn`:
// then an honest worker could have drawn it. The draw walks the tokens in
// probability order and takes the one whose stretch of cumulative mass
// holds the seeded point. A drift changes that in two ways, which the
// candidates below combine, each within the bound (the draw decides):
// - nearly equal tokens trade places in the order, and so their stretches:
//   the claimed token takes the place of a token it would pass on the way
//   to the drawn one's (the drawn one included): their logits exchanged,
//   so it passes every token between, or when they are further apart, it
//   and those tokens meet half way;
// - the stretches' ends move: everything ranked before the claimed token
//   shifted away from it (lowered when the draw fell short of it, raised
//   with it when it went past), by fractions of what the bound has left,
//   since a full shift can carry the point past the claimed stretch. For a
//   greedy step the full shift is the exact test.
// A flat distribution makes both common: on a small random model, the
// drift between two SIMD targets' int8 roundings (2e-3 of the logits'
// scale) swapped two tokens 5e-4 apart (tests/net/verify.test.mjs).
bool within_bound(const std::vector<float>& row, const nlohmann::json& p, const std::vector<int32_t>& history,
                  int32_t claimed, int32_t drawn) {
  const float tol = static_cast<float>(logit_tolerance(row.data(), static_cast<int64_t>(row.size())));
  const float lc = row[claimed], ld = row[drawn];
  // Ranked before the claimed token in `r`: larger, ties to the lower id
  // (the sample op's order; penalties aside, which only change what is tried).
  const auto ranks_before = [&](const std::vector<float>& r, size_t i) {
    return r[i] > r[claimed] || (r[i] == r[claimed] && i < static_cast<size_t>(claimed));
  };
  const bool went_past = !ranks_before(row, drawn);  // the draw fell past the claimed token's stretch
  // `base` with the ends shifted by fractions of `budget`; when the draw fell
  // short, the lowered tokens either stop just above the raised claimed one
  // (the order kept) or pass it.
  const auto shifted_gives_claimed = [&](const std::vector<float>& base, float budget) {
    for (float share : {0.0f, 1.0f, 0.5f, 0.25f, 0.125f, 0.0625f})
      for (bool keep_order : {false, true}) {
        if (keep_order && (went_past || share == 0)) continue;
        const float move = share * budget;
        std::vector<float> r = base;
        r[claimed] += move;
        const float floor =
            keep_order ? std::nextafter(r[claimed], std::numeric_limits<float>::infinity()) : -HUGE_VALF;
        for (size_t i = 0; i < r.size(); ++i)
          if (ranks_before(base, i)) r[i] = went_past ? base[i] + move : std::max(base[i] - move, floor);
        if (draw(r, p, history) == claimed) return true;
      }
    return false;
  };
  if (shifted_gives_claimed(row, tol)) return true;
  const float lo = std::min(lc, ld), hi = std::max(lc, ld), nudge = 1e-3f * tol;
  int passed = 0;
  for (size_t x = 0; x < row.size() && passed < 16; ++x) {
    const float lx = row[x], gap = std::fabs(lx - lc);
    if (x == static_cast<size_t>(claimed) || lx < lo || lx > hi || 0.5f * gap + nudge > tol) continue;
    ++passed;
    std::vector<float> r = row;
    if (gap <= tol) {
      std::swap(r[claimed], r[x]);
      if (shifted_gives_claimed(r, tol - gap)) return true;
    }
    // Further apart: the claimed token moves half way, past the midpoint,
    // and the tokens between it and x that it would not pass move to there.
    const float mid = 0.5f * (lx + lc);
    r = row;
    r[claimed] = went_past ? mid - nudge : mid + nudge;
    for (size_t i = 0; i < r.size(); ++i) {
      if (i == static_cast<size_t>(claimed)) continue;
      if (went_past && row[i] >= lx && row[i] < mid) r[i] = mid;
      if (!went_past && row[i] <= lx && row[i] > mid) r[i] = mid;
    }
    if (shifted_gives_claimed(r, tol - 0.5f * gap - nudge)) return true;
  }
  return false;
}

}  // namespace

TokenVerdict check_token(const float* logits, int64_t V, const nlohmann::json& sample, uint64_t step,
                         const std::vector<int32_t>& history, int32_t claimed) {
  if (V <= 0) throw Error(ErrorCode::Internal, "check_token: empty logits");
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [k, v] : sample.items())
    if (v.is_number()) p[k] = v;
  p["step"] = step;
  const bool penalties = p.value("repetitionPenalty", 1.0) != 1.0 || p.value("presencePenalty", 0.0) != 0.0;
  if (penalties) p["penaltyEnd"] = history.size();
  std::vector<float> row(logits, logits + V);
  TokenVerdict v;
  v.token = draw(row, p, history);
  if (v.token == claimed) return v;
  if (claimed < 0 || claimed >= V) {
    v.agreement = TokenAgreement::Differs;
    return v;
  }
  v.gap = double(row[v.token]) - row[claimed];
  v.agreement = within_bound(row, p, history, claimed, v.token) ? TokenAgreement::NearTie : TokenAgreement::Differs;
  return v;
}

}  // namespace bonfire::net
