// DeadSweeps (store/embedded/dead_sweeps.h) and DueHistogram (due_histogram.h) on their own,
// driven by a ManualClock.
#include "store/embedded/dead_sweeps.h"

#include <gtest/gtest.h>

#include "store/embedded/due_histogram.h"
#include "store/embedded/queue_state.h"

namespace delayq {
namespace {

TEST(DeadSweeps, AQueueIsSweptWhenItsOldestDeadJobRunsOut) {
  ManualClock clock(1'700'000'000'000'000);
  const int64_t now_ms = clock.NowUs() / 1000;
  QueueState a("a");
  QueueState b("b");
  DeadSweeps sweeps;
  sweeps.Plan(&a, 3, now_ms, 60'000);
  sweeps.Plan(&b, 1, now_ms - 30'000, 60'000);
  sweeps.Plan(&b, 0, now_ms - 30'000, 60'000);  // no dead job left: none planned
  EXPECT_EQ(sweeps.At(&b), Clock::kNever);
  sweeps.Plan(&b, 1, Clock::kNever, 60'000);  // no floor known: none
  EXPECT_EQ(sweeps.Due(now_ms), std::nullopt);
  EXPECT_EQ(sweeps.Next(), now_ms + 60'000);
  clock.AdvanceMs(60'000);
  EXPECT_EQ(sweeps.Due(clock.NowUs() / 1000), &a);
  sweeps.Retry(&a, clock.NowUs() / 1000 + 1'000);  // the sweep failed
  EXPECT_EQ(sweeps.Due(clock.NowUs() / 1000), std::nullopt);
  sweeps.Drop(&a);
  EXPECT_TRUE(sweeps.empty());
}

TEST(DueHistogram, CountsScheduledJobsPerMinuteIntoBuckets) {
  const int64_t now_ms = 120'000 + 30'000;  // in minute 2
  DueHistogram h;
  h.Add(now_ms + 10'000, 1);     // minute 2
  h.Add(now_ms + 60'000, 1);     // minute 3
  h.Add(now_ms + 60'000, 1);     // minute 3
  h.Add(now_ms + 3'600'000, 1);  // an hour on
  h.Add(now_ms - 90'000, 1);     // overdue: the first bucket
  h.Add(now_ms + 60'000, -1);    // one of minute 3 left
  const ScheduleHistogram got = h.Buckets(now_ms, 60'000, 3);
  EXPECT_EQ(got.start_ms, 120'000);
  EXPECT_EQ(got.buckets, (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(got.later, 1);
  h.Add(now_ms + 10'000, -1);
  h.Add(now_ms + 10'000, -1);  // below zero: the minute is dropped, not negative
  EXPECT_EQ(h.Buckets(now_ms, 60'000, 3).buckets[0], 1);
}

}  // namespace
}  // namespace delayq
