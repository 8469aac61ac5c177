// Waiters (store/embedded/waiters.h) on their own, driven by a ManualClock: each queue's line is
// first come first served, a waiter leaves exactly once (served, timed out, cancelled or closed),
// and a line keeps no handle of one that left in front.
#include "store/embedded/waiters.h"

#include <gtest/gtest.h>

#include "store/embedded/queue_state.h"

namespace delayq {
namespace {

ReserveRequest Asking(int32_t max) {
  ReserveRequest r;
  r.max = max;
  return r;
}

TEST(Waiters, EachLineIsFirstComeFirstServed) {
  ManualClock clock(0);
  QueueState a("a");
  QueueState b("b");
  Waiters waiters;
  const uint64_t h1 = waiters.Add(&a, Asking(1), clock.MonoUs() + 500, nullptr);
  const uint64_t h2 = waiters.Add(&b, Asking(2), clock.MonoUs() + 100, nullptr);
  const uint64_t h3 = waiters.Add(&a, Asking(3), clock.MonoUs() + 200, nullptr);
  EXPECT_NE(h1, 0u);
  EXPECT_EQ(waiters.First(&a)->handle, h1);
  EXPECT_EQ(waiters.TakeFirst(&a).request.max, 1);
  EXPECT_EQ(waiters.First(&a)->handle, h3);
  EXPECT_EQ(waiters.First(&b)->handle, h2);
  EXPECT_EQ(waiters.NextDeadline(), 100);
  EXPECT_EQ(waiters.size(), 2u);
}

TEST(Waiters, AWaiterLeavesOnceWhicheverWayItGoes) {
  ManualClock clock(0);
  QueueState q("q");
  Waiters waiters;
  int answered = 0;
  auto done = [&](Result<std::vector<Delivery>>) { ++answered; };
  const uint64_t early = waiters.Add(&q, Asking(1), 100, done);
  const uint64_t cancelled = waiters.Add(&q, Asking(1), 200, done);
  const uint64_t late = waiters.Add(&q, Asking(1), 300, done);
  ASSERT_TRUE(waiters.Take(cancelled).has_value());
  EXPECT_FALSE(waiters.Take(cancelled).has_value());  // cancelled twice: once
  clock.AdvanceUs(250);
  std::vector<Waiter> out = waiters.TimedOut(clock.MonoUs());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].handle, early);
  EXPECT_TRUE(waiters.TimedOut(clock.MonoUs()).empty());
  // The handles of the two that left are skipped: the line's first is the late one.
  EXPECT_EQ(waiters.First(&q)->handle, late);
  EXPECT_EQ(q.waiting.size(), 1u);
  EXPECT_TRUE(waiters.AnyIn(&q));
  for (Waiter& w : waiters.TakeAll()) w.done(std::vector<Delivery>{});
  EXPECT_EQ(answered, 1);
  EXPECT_FALSE(waiters.AnyIn(&q));
  EXPECT_EQ(waiters.First(&q), nullptr);
  EXPECT_EQ(waiters.NextDeadline(), Clock::kNever);
}

TEST(Waiters, TheLineOfADeletedQueueMovesInOrder) {
  QueueState gone("q");
  QueueState fresh("q");
  Waiters waiters;
  const uint64_t h1 = waiters.Add(&gone, Asking(1), 100, nullptr);
  const uint64_t h2 = waiters.Add(&gone, Asking(1), 100, nullptr);
  const uint64_t h3 = waiters.Add(&gone, Asking(1), 100, nullptr);
  (void)waiters.Take(h2);
  waiters.MoveLine(&gone, &fresh);
  EXPECT_TRUE(gone.waiting.empty());
  EXPECT_EQ(fresh.waiting, (WaiterLine{h1, h3}));
  EXPECT_EQ(waiters.TakeFirst(&fresh).queue, &fresh);
  EXPECT_EQ(waiters.First(&fresh)->handle, h3);
}

}  // namespace
}  // namespace delayq
