// net/step_scheduler.h's chunk sizing: a long prompt read while sequences
// decode goes in chunks that take about one decode batch's time.
#include <gtest/gtest.h>

#include "net/step_scheduler.h"

namespace bonfire::net {
namespace {

TEST(StepScheduler, PrefillChunksFollowTheDecodeBatchTime) {
  // A chunk costs one read of the weights plus its tokens: here 10 ms plus
  // 0.5 ms a token, against a 45 ms decode batch. From 8 tokens (14 ms) the
  // chunk doubles while it takes under 3/4 of a batch, and stays at 64
  // (42 ms, inside [3/4, 5/4] of 45 ms).
  auto cost = [](int64_t tokens) { return 10.0 + 0.5 * static_cast<double>(tokens); };
  int64_t chunk = 8;
  for (int i = 0; i < 10; ++i) chunk = StepScheduler::next_chunk(chunk, cost(chunk), 45, 512);
  EXPECT_EQ(chunk, 64);
  // Where reading the weights alone takes a batch's time, 8 tokens it is.
  chunk = 8;
  for (int i = 0; i < 10; ++i) chunk = StepScheduler::next_chunk(chunk, 40.0 + 0.5 * chunk, 45, 512);
  EXPECT_EQ(chunk, 8);
  // Cheap chunks grow to the cap and stay there.
  chunk = 8;
  for (int i = 0; i < 20; ++i) chunk = StepScheduler::next_chunk(chunk, 1.0, 45, 512);
  EXPECT_EQ(chunk, 512);
  // Dear ones shrink to 8 and no further.
  for (int i = 0; i < 20; ++i) chunk = StepScheduler::next_chunk(chunk, 500.0, 45, 512);
  EXPECT_EQ(chunk, 8);
  // Inside the band nothing moves; without a batch time nothing grows.
  EXPECT_EQ(StepScheduler::next_chunk(64, 45.0, 45, 512), 64);
  EXPECT_EQ(StepScheduler::next_chunk(64, 1.0, 0, 512), 64);
  EXPECT_EQ(StepScheduler::next_chunk(1024, 1.0, 0, 512), 512);
}

}  // namespace
}  // namespace bonfire::net
