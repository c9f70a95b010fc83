// The coordinator's session memory ledger (net/session_ledger.h): all or
// nothing, claims on one worker count together, and a release wakes a
// generation waiting for room.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "net/session_ledger.h"

namespace bonfire::net {
namespace {

using Clock = std::chrono::steady_clock;

TEST(SessionLedger, ReservesAllOrNothing) {
  SessionLedger l;
  EXPECT_TRUE(l.try_reserve({{"a", 60, 100}}).empty());
  EXPECT_TRUE(l.try_reserve({{"a", 30, 100}, {"b", 10, 100}}).empty());
  EXPECT_EQ(l.reserved("a"), 90);
  // b would fit, a would not: neither is taken.
  EXPECT_FALSE(l.try_reserve({{"b", 50, 100}, {"a", 20, 100}}).empty());
  EXPECT_EQ(l.reserved("a"), 90);
  EXPECT_EQ(l.reserved("b"), 10);
  // Two stages on one worker count together.
  EXPECT_FALSE(l.try_reserve({{"c", 60, 100}, {"c", 50, 100}}).empty());
  EXPECT_EQ(l.reserved("c"), 0);
  EXPECT_TRUE(l.try_reserve({{"c", 60, 100}, {"c", 40, 100}}).empty());
  l.release({{"a", 60, 100}, {"a", 30, 100}, {"b", 10, 100}, {"c", 100, 100}, {"gone", 5, 100}});
  EXPECT_EQ(l.reserved("a"), 0);
  EXPECT_EQ(l.reserved("b"), 0);
  EXPECT_EQ(l.reserved("c"), 0);
}

TEST(SessionLedger, BudgetIsThreeQuartersOfTheMemory) {
  EXPECT_EQ(SessionLedger::session_budget(4 << 20), 3 << 20);
  EXPECT_EQ(SessionLedger::session_budget(0), 0);
}

TEST(SessionLedger, AReleaseWakesTheWaitingAndTheWaitEnds) {
  SessionLedger l;
  ASSERT_TRUE(l.try_reserve({{"a", 80, 100}}).empty());
  EXPECT_FALSE(l.try_reserve({{"a", 40, 100}}).empty());
  std::atomic<int> woke{-1};
  std::thread waiter([&] { woke = l.wait_for_release(Clock::now() + std::chrono::seconds(30)) ? 1 : 0; });
  for (int i = 0; i < 2000 && l.waiting() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(l.waiting(), 1);
  const auto t0 = Clock::now();
  l.release({{"a", 80, 100}});
  waiter.join();
  EXPECT_EQ(woke.load(), 1);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(l.waiting(), 0);
  EXPECT_TRUE(l.try_reserve({{"a", 40, 100}}).empty());
  // Nothing given back: the wait ends at its deadline, false.
  EXPECT_FALSE(l.wait_for_release(Clock::now() + std::chrono::milliseconds(20)));
  EXPECT_EQ(l.waiting(), 0);
}

}  // namespace
}  // namespace bonfire::net
