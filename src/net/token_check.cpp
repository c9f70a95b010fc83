#include "net/token_check.h"

#include <algorithm>
#include <cmath>

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
  const float tol = static_cast<float>(logit_tolerance(row.data(), V));
  row[claimed] += tol;
  row[v.token] -= tol;
  v.agreement = draw(row, p, history) == claimed ? TokenAgreement::NearTie : TokenAgreement::Differs;
  return v;
}

}  // namespace bonfire::net
