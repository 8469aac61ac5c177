// FlowState (store/embedded/flow_state.h) on its own, driven by a ManualClock: the token bucket
// and the caps decide what a reserve may take, a limit that holds jobs back is remembered from
// the moment it starts, and a held job's wait splits into lateness and limit_wait
// (SplitLateness, whose Lua twin is RedisLua.TheLatenessSplitIsTheCppOne).
#include "store/embedded/flow_state.h"

#include <gtest/gtest.h>

#include <limits>

#include "store/embedded/lease_counts.h"

namespace delayq {
namespace {

QueueConfig Rate(double per_s, int64_t burst) {
  QueueConfig c;
  c.rate_per_s = per_s;
  c.burst = burst;
  return c;
}

TEST(FlowState, TheBucketHoldsJobsBackFromTheMomentItRunsDry) {
  ManualClock clock(10'000'000);
  const QueueConfig config = Rate(10, 2);  // a token each 100 ms, two at most
  FlowState flow;
  LeaseCounts leases;
  auto a = flow.Allow(config, 5, 5, leases, true, clock.NowUs(), clock.MonoUs());
  EXPECT_EQ(a.max, 2);                                // the full bucket
  EXPECT_EQ(flow.limited_since_us(), clock.NowUs());  // 5 asked, 5 ready: held back
  EXPECT_EQ(a.next_token_mono_us, Clock::kNever);     // tokens are still in the bucket
  flow.Took(config, 2);
  clock.AdvanceMs(40);
  a = flow.Allow(config, 5, 3, leases, true, clock.NowUs(), clock.MonoUs());
  EXPECT_EQ(a.max, 0);
  EXPECT_EQ(a.next_token_mono_us, clock.MonoUs() + 60'000);    // the next token
  EXPECT_EQ(flow.limited_since_us(), clock.NowUs() - 40'000);  // still since it started
  clock.AdvanceMs(60);
  a = flow.Allow(config, 1, 3, leases, true, clock.NowUs(), clock.MonoUs());
  EXPECT_EQ(a.max, 1);  // asks for no more than it gets: nothing is held back
  EXPECT_EQ(flow.limited_since_us(), Clock::kNever);
}

TEST(FlowState, MaxReservedAndTheDefaultGroupsCapCountTheLeases) {
  QueueConfig config;
  config.max_reserved = 3;
  config.group_max_reserved = 2;
  FlowState flow;
  LeaseCounts leases;
  leases.Add(DueKey{1, {}}, "");
  EXPECT_EQ(flow.Allow(config, 10, 10, leases, true, 0, 0).max, 1);   // the default group's cap
  EXPECT_EQ(flow.Allow(config, 10, 10, leases, false, 0, 0).max, 2);  // groups: judged per pick
  leases.Add(DueKey{2, {}}, "g");
  leases.Add(DueKey{3, {}}, "g");
  EXPECT_EQ(flow.Allow(config, 10, 10, leases, false, 0, 0).max, 0);  // max_reserved
  EXPECT_EQ(flow.Allow(config, 0, 10, leases, false, 0, 0).max, 0);
}

TEST(FlowState, AGroupHeldAtItsCapIsRememberedUntilServed) {
  FlowState flow;
  flow.GroupHeld("g", 100);
  flow.GroupHeld("g", 200);  // already held: since 100
  EXPECT_EQ(flow.GroupServed("g"), 100);
  EXPECT_EQ(flow.GroupServed("g"), Clock::kNever);
  EXPECT_EQ(flow.GroupServed(""), Clock::kNever);
}

TEST(FlowState, AHeldJobsWaitIsLateUntilTheLimitHeldItThenLimitWait) {
  FlowState flow;
  LatencyHistogram lateness;
  flow.RecordFirstDelivery(lateness, 1'000, Clock::kNever, 5'000);  // not held
  flow.RecordFirstDelivery(lateness, 1'000, 3'000, 5'000);          // late 2 ms, held 2 ms
  flow.RecordFirstDelivery(lateness, 4'000, 3'000, 5'000);          // held before it was due
  EXPECT_EQ(lateness.count(), 3u);
  EXPECT_EQ(lateness.max_us(), 4'000);
  EXPECT_EQ(flow.limit_wait().count(), 2u);
  EXPECT_EQ(flow.limit_wait().max_us(), 2'000);
}

TEST(SplitLateness, TakesTheExtremes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(SplitLateness(0, Clock::kNever, 10).late_us, 10);
  EXPECT_EQ(SplitLateness(0, Clock::kNever, 10).limit_wait_us, -1);
  EXPECT_EQ(SplitLateness(0, 10, 10).limit_wait_us, -1);  // held from now: not held
  EXPECT_EQ(SplitLateness(0, 9, 10).late_us, 9);
  EXPECT_EQ(SplitLateness(0, 9, 10).limit_wait_us, 1);
  EXPECT_EQ(SplitLateness(20, 9, 30).late_us, 0);  // held before due: never late
  EXPECT_EQ(SplitLateness(20, 9, 30).limit_wait_us, 10);
  EXPECT_EQ(SplitLateness(kMax - 1, 0, kMax).limit_wait_us, 1);
  // Due after now (the wall clock stepped back) and held: neither part is negative, and the
  // wait still counts (found in review: it was dropped, one limit_wait sample fewer).
  EXPECT_EQ(SplitLateness(30, 9, 20).late_us, 0);
  EXPECT_EQ(SplitLateness(30, 9, 20).limit_wait_us, 0);
}

}  // namespace
}  // namespace delayq
