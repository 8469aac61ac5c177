#include <gtest/gtest.h>

#include "delayq/clock.h"

namespace delayq {
namespace {

// With nothing to wait for, a scheduler's wait is bounded: kNever microseconds overflowed when the
// condition variable converted it to nanoseconds (UBSan found it once nothing else bounded it).
TEST(ClockWait, NothingToWaitForIsALongButBoundedWait) {
  auto clock = SystemClock::Instance();
  EXPECT_EQ(clock->RealTimeUntil(Clock::kNever, Clock::kNever).count(), Clock::kLongestWaitUs);
  EXPECT_LE(clock->RealTimeUntil(Clock::kNever, clock->MonoUs() + 5'000'000).count(), 5'000'000);
  EXPECT_LE(clock->RealTimeUntil(clock->NowUs() + 3'600'000'000LL * 24).count(), SystemClock::kStepCheckUs);
  ManualClock manual(1'000'000);
  EXPECT_EQ(manual.RealTimeUntil(Clock::kNever, Clock::kNever).count(), Clock::kLongestWaitUs);
  EXPECT_EQ(manual.RealTimeUntil(500'000, Clock::kNever).count(), 0);
}

}  // namespace
}  // namespace delayq
