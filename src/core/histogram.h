// A log-linear histogram of non-negative microsecond values (delivery lateness): exact below
// 64 us, then 32 sub-buckets per power of two (about 3% relative error), up to 2^42 us (50
// days; larger values land in the last bucket). Fixed size, no allocation after construction.
#pragma once

#include <array>
#include <cstdint>

#include "delayq/job.h"

namespace delayq {

class LatencyHistogram {
 public:
  void Record(int64_t value_us);
  void Merge(const LatencyHistogram& other);
  uint64_t count() const { return count_; }
  int64_t max_us() const { return max_us_; }
  // The value below which `q` (0..1) of the recorded values fall (a bucket's upper edge).
  int64_t Percentile(double q) const;
  // Recorded values <= limit_us (bucket-resolution).
  uint64_t CountAtMost(int64_t limit_us) const;
  LatenessSummary Summary() const;

  static constexpr int kSubBits = 5;             // 32 sub-buckets per power of two
  static constexpr int kLinear = 2 << kSubBits;  // values below 64 map to themselves
  static constexpr int kMaxExponent = 42;
  static constexpr int kBuckets = kLinear + (kMaxExponent - kSubBits) * (1 << kSubBits);
  static int BucketOf(int64_t value_us);
  static int64_t UpperEdge(int bucket);  // largest value of the bucket

 private:
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  int64_t max_us_ = 0;
  int64_t sum_us_ = 0;
};

}  // namespace delayq
