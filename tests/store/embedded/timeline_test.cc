// Timeline and KeyedTimeline (store/embedded/timeline.h) on their own, driven by a ManualClock:
// the scheduler's next deadline is always the earliest entry, and what is due comes out in order.
#include "store/embedded/timeline.h"

#include <gtest/gtest.h>

#include <limits>

namespace delayq {
namespace {

TEST(Timeline, AnswersTheEarliestAndWhatIsDueInOrder) {
  ManualClock clock(1'000'000);
  Timeline<int> t;
  EXPECT_EQ(t.Next(), Clock::kNever);
  t.Add(clock.MonoUs() + 300, 3);
  t.Add(clock.MonoUs() + 100, 1);
  t.Add(clock.MonoUs() + 100, 2);  // the same moment: by key
  EXPECT_EQ(t.Next(), clock.MonoUs() + 100);
  EXPECT_TRUE(t.DueBy(clock.MonoUs()).empty());
  clock.AdvanceUs(100);
  EXPECT_EQ(t.DueBy(clock.MonoUs()), (std::vector<int>{1, 2}));
  EXPECT_EQ(t.size(), 3u);  // DueBy only looks
  EXPECT_EQ(t.PopDue(clock.MonoUs()), 1);
  EXPECT_EQ(t.PopDue(clock.MonoUs()), 2);
  EXPECT_EQ(t.PopDue(clock.MonoUs()), std::nullopt);
  t.Erase(clock.MonoUs() + 200, 3);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.Next(), Clock::kNever);
}

TEST(Timeline, TakesTheExtremesOfTime) {
  Timeline<int> t;
  t.Add(std::numeric_limits<int64_t>::min(), 1);
  t.Add(std::numeric_limits<int64_t>::max() - 1, 2);
  EXPECT_EQ(t.PopDue(std::numeric_limits<int64_t>::min()), 1);
  EXPECT_EQ(t.PopDue(0), std::nullopt);
  EXPECT_EQ(t.PopDue(std::numeric_limits<int64_t>::max()), 2);
  EXPECT_TRUE(t.empty());
}

TEST(KeyedTimeline, KeepsOneMomentPerKey) {
  ManualClock clock(5'000);
  KeyedTimeline<int> t;
  t.Set(7, clock.MonoUs() + 50);
  t.Set(7, clock.MonoUs() + 80);  // replaces
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.At(7), clock.MonoUs() + 80);
  EXPECT_FALSE(t.SetEarlier(7, clock.MonoUs() + 90));
  EXPECT_TRUE(t.SetEarlier(7, clock.MonoUs() + 10));
  EXPECT_TRUE(t.SetEarlier(8, clock.MonoUs() + 20));  // a new key
  EXPECT_EQ(t.First(), 7);
  clock.AdvanceUs(15);
  EXPECT_EQ(t.PopDue(clock.MonoUs()), 7);
  EXPECT_EQ(t.At(7), Clock::kNever);
  EXPECT_EQ(t.PopDue(clock.MonoUs()), std::nullopt);
  t.Erase(8);
  t.Erase(8);  // twice: nothing
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.Next(), Clock::kNever);
}

}  // namespace
}  // namespace delayq
