#include "core/histogram.h"

#include <gtest/gtest.h>

#include "core/backoff.h"

namespace delayq {
namespace {

TEST(LatencyHistogram, BucketsAreMonotonicAndTight) {
  int last = -1;
  for (int64_t v = 0; v < (int64_t{1} << 30); v = v < 100 ? v + 1 : v + v / 50) {
    int b = LatencyHistogram::BucketOf(v);
    EXPECT_GE(b, last);
    last = b;
    EXPECT_GE(LatencyHistogram::UpperEdge(b), v);
    EXPECT_LE(LatencyHistogram::UpperEdge(b), v + v / 30 + 1) << v;  // ~3% resolution
  }
  EXPECT_EQ(LatencyHistogram::BucketOf(int64_t{1} << 50), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogram, Percentiles) {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.Record(i * 1000);  // 1..1000 ms
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_NEAR(h.Percentile(0.5), 500'000, 500'000 * 0.04);
  EXPECT_NEAR(h.Percentile(0.99), 990'000, 990'000 * 0.04);
  EXPECT_EQ(h.Percentile(1.0), 1'000'000);
  LatenessSummary s = h.Summary();
  EXPECT_NEAR(s.p99_ms, 990, 40);
  EXPECT_EQ(s.max_ms, 1000);
  ASSERT_EQ(s.cumulative.size(), std::size(LatenessSummary::kLatenessBucketsMs));
  EXPECT_NEAR(static_cast<double>(s.cumulative[6]), 100, 4);  // <= 100 ms
  EXPECT_EQ(s.cumulative.back(), 1000u);
  h.Record(-5);
  EXPECT_EQ(h.CountAtMost(0), 1u);
}

TEST(Backoff, GrowsCapsAndJitters) {
  BackoffPolicy p{1000, 2.0, 10'000, 0.0};
  EXPECT_EQ(BackoffDelayMs(p, 1, 0.5), 1000);
  EXPECT_EQ(BackoffDelayMs(p, 2, 0.5), 2000);
  EXPECT_EQ(BackoffDelayMs(p, 4, 0.5), 8000);
  EXPECT_EQ(BackoffDelayMs(p, 5, 0.5), 10'000);
  EXPECT_EQ(BackoffDelayMs(p, 500, 0.5), 10'000);
  p.jitter = 0.1;
  EXPECT_EQ(BackoffDelayMs(p, 1, 0.0), 900);
  EXPECT_EQ(BackoffDelayMs(p, 1, 0.999999), 1100);
  EXPECT_EQ(BackoffDelayMs(p, 5, 0.999999), 10'000) << "jitter never passes max_ms";
}

TEST(LatencyHistogram, DecadesLateValuesSaturateTheSumInsteadOfOverflowing) {
  LatencyHistogram h;
  const int64_t decades_us = int64_t{1'796'000'000'000} * 1000;  // due at the epoch, seen in 2026
  for (int i = 0; i < 10'000; ++i) h.Record(decades_us);
  EXPECT_EQ(h.count(), 10'000u);
  EXPECT_EQ(h.max_us(), decades_us);
  EXPECT_GT(h.Summary().sum_ms, 0.0);
  EXPECT_EQ(h.Percentile(0.5), LatencyHistogram::UpperEdge(LatencyHistogram::kBuckets - 1));
}

}  // namespace
}  // namespace delayq
