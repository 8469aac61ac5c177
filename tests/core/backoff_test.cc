#include "core/backoff.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

TEST(Backoff, GrowsByTheFactorUpToTheCapWithJitterAround) {
  const BackoffPolicy p{.base_ms = 1000, .factor = 2.0, .max_ms = 10'000, .jitter = 0.0};
  EXPECT_EQ(BackoffDelayMs(p, 1, 0.5), 1000);
  EXPECT_EQ(BackoffDelayMs(p, 2, 0.5), 2000);
  EXPECT_EQ(BackoffDelayMs(p, 4, 0.5), 8000);
  EXPECT_EQ(BackoffDelayMs(p, 5, 0.5), 10'000);
  const BackoffPolicy j{.base_ms = 1000, .factor = 2.0, .max_ms = 10'000, .jitter = 0.5};
  EXPECT_EQ(BackoffDelayMs(j, 1, 0.0), 500);
  EXPECT_EQ(BackoffDelayMs(j, 1, 0.75), 1250);
  EXPECT_EQ(BackoffDelayMs(j, 5, 0.99), 10'000) << "clamped to max_ms after the jitter";
}

// factor^(attempt-1) overflows to infinity after a few hundred attempts: that is the cap, and with
// base_ms 0 the delay stays 0 (0 * infinity is NaN; the Lua twin answered INT64_MIN for it).
TEST(Backoff, AnOverflowingPowerIsTheCapAndAZeroBaseStaysZero) {
  EXPECT_EQ(BackoffDelayMs({.base_ms = 1000, .factor = 100, .max_ms = 3'600'000, .jitter = 0.1}, 1000, 0.5), 3'600'000);
  EXPECT_EQ(BackoffDelayMs({.base_ms = 1000, .factor = 100, .max_ms = 3'600'000, .jitter = 0.1}, 1000, 0.3), 3'456'000);
  EXPECT_EQ(BackoffDelayMs({.base_ms = 0, .factor = 100, .max_ms = 3'600'000, .jitter = 0.1}, 1000, 0.3), 0);
  EXPECT_EQ(BackoffDelayMs({.base_ms = 0, .factor = 1, .max_ms = 0, .jitter = 1}, 1, 0.999), 0);
}

}  // namespace
}  // namespace delayq
