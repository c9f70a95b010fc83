// net/token_check.h: when a recomputed step agrees with a worker's token.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "net/token_check.h"

using bonfire::net::check_token;
using bonfire::net::kLogitTolerance;
using bonfire::net::TokenAgreement;
using nlohmann::json;

namespace {

std::vector<float> row(int n) {
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = static_cast<float>((i * 37) % n) * 0.2f;  // distinct, 0.2 apart
  return l;
}

int best(const std::vector<float>& l, int except = -1) {
  int b = -1;
  for (int i = 0; i < static_cast<int>(l.size()); ++i)
    if (i != except && (b < 0 || l[i] > l[b])) b = i;
  return b;
}

}  // namespace

TEST(TokenCheck, GreedySameAndSecondBest) {
  const auto l = row(50);
  const int top = best(l), second = best(l, top);
  const json greedy = {{"temperature", 0}};
  EXPECT_EQ(check_token(l.data(), 50, greedy, 3, {}, top).agreement, TokenAgreement::Same);
  const auto v = check_token(l.data(), 50, greedy, 3, {}, second);
  EXPECT_EQ(v.agreement, TokenAgreement::Differs);
  EXPECT_EQ(v.token, top);
  EXPECT_NEAR(v.gap, l[top] - l[second], 1e-6);
  EXPECT_EQ(check_token(l.data(), 50, greedy, 3, {}, 50).agreement, TokenAgreement::Differs);  // out of range
}

TEST(TokenCheck, NearTieWithinTheBoundIsForgiven) {
  auto l = row(50);
  const int top = best(l), second = best(l, top);
  float scale = 0;
  for (float x : l) scale = std::max(scale, std::fabs(x));
  const float bound = static_cast<float>(kLogitTolerance * (1 + scale));
  l[second] = l[top] - 0.5f * bound;  // inside the f32 bound: either draw is honest
  EXPECT_EQ(check_token(l.data(), 50, {{"temperature", 0}}, 0, {}, second).agreement, TokenAgreement::NearTie);
  l[second] = l[top] - 3 * bound;  // outside it: a wrong token
  EXPECT_EQ(check_token(l.data(), 50, {{"temperature", 0}}, 0, {}, second).agreement, TokenAgreement::Differs);
}

TEST(TokenCheck, SampledDrawDependsOnSeedAndStep) {
  const auto l = row(50);
  const json p = {{"temperature", 1.0}, {"seed", 42}, {"topK", 0}, {"topP", 1.0}};
  // The check redraws exactly what the sample op draws for (seed, step):
  // across steps the draws differ, and each agrees with itself only.
  std::vector<int> draws;
  for (int step = 0; step < 8; ++step) {
    const auto v = check_token(l.data(), 50, p, step, {}, -1);
    ASSERT_GE(v.token, 0);
    EXPECT_EQ(check_token(l.data(), 50, p, step, {}, v.token).agreement, TokenAgreement::Same);
    draws.push_back(v.token);
  }
  EXPECT_GT(std::set<int>(draws.begin(), draws.end()).size(), 1u);
}

TEST(TokenCheck, PenaltiesReadTheHistory) {
  auto l = row(50);
  const int top = best(l), second = best(l, top);
  l[second] = l[top] - 0.1f;
  const json p = {{"temperature", 0}, {"repetitionPenalty", 2.0}};
  // With the top token in the history, the penalty makes the second one the draw.
  EXPECT_EQ(check_token(l.data(), 50, p, 1, {top}, second).agreement, TokenAgreement::Same);
  EXPECT_EQ(check_token(l.data(), 50, p, 1, {}, top).agreement, TokenAgreement::Same);
}
