#include "core/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace delayq {

int LatencyHistogram::BucketOf(int64_t v) {
  if (v < 0) v = 0;
  if (v < kLinear) return static_cast<int>(v);
  int exponent = std::bit_width(static_cast<uint64_t>(v)) - 1;  // >= kSubBits + 1
  if (exponent >= kMaxExponent) return kBuckets - 1;
  int sub = static_cast<int>((v >> (exponent - kSubBits)) & ((1 << kSubBits) - 1));
  return kLinear + (exponent - kSubBits - 1) * (1 << kSubBits) + sub;
}

int64_t LatencyHistogram::UpperEdge(int bucket) {
  if (bucket < kLinear) return bucket;
  int rel = bucket - kLinear;
  int exponent = rel / (1 << kSubBits) + kSubBits + 1;
  int sub = rel % (1 << kSubBits);
  int64_t base = (int64_t{1} << exponent) + (static_cast<int64_t>(sub) << (exponent - kSubBits));
  return base + (int64_t{1} << (exponent - kSubBits)) - 1;
}

namespace {
// A message due at the epoch (a producer's mistake, or a backlog) is decades late: the sum
// stops at its ceiling rather than overflowing.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  return b > std::numeric_limits<int64_t>::max() - a ? std::numeric_limits<int64_t>::max() : a + b;
}
}  // namespace

void LatencyHistogram::Record(int64_t value_us) {
  if (value_us < 0) value_us = 0;
  ++buckets_[BucketOf(value_us)];
  ++count_;
  max_us_ = std::max(max_us_, value_us);
  sum_us_ = SaturatingAdd(sum_us_, value_us);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  max_us_ = std::max(max_us_, other.max_us_);
  sum_us_ = SaturatingAdd(sum_us_, other.sum_us_);
}

int64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(UpperEdge(i), max_us_);
  }
  return max_us_;
}

uint64_t LatencyHistogram::CountAtMost(int64_t limit_us) const {
  uint64_t n = 0;
  for (int i = 0; i < kBuckets && UpperEdge(i) <= limit_us; ++i) n += buckets_[i];
  return n;
}

LatenessSummary LatencyHistogram::Summary() const {
  LatenessSummary s;
  s.count = count_;
  s.p50_ms = static_cast<double>(Percentile(0.50)) / 1000.0;
  s.p90_ms = static_cast<double>(Percentile(0.90)) / 1000.0;
  s.p99_ms = static_cast<double>(Percentile(0.99)) / 1000.0;
  s.p999_ms = static_cast<double>(Percentile(0.999)) / 1000.0;
  s.max_ms = static_cast<double>(max_us_) / 1000.0;
  s.sum_ms = static_cast<double>(sum_us_) / 1000.0;
  for (double edge_ms : LatenessSummary::kLatenessBucketsMs) {
    s.cumulative.push_back(CountAtMost(static_cast<int64_t>(edge_ms * 1000)));
  }
  return s;
}

}  // namespace delayq
