#include "core/flow_control.h"

#include <algorithm>
#include <cmath>

namespace delayq {

double EffectiveBurst(const QueueConfig& c) {
  if (c.burst > 0) return static_cast<double>(c.burst);
  return std::max(1.0, std::ceil(c.rate_per_s));
}

int64_t Allowance(const QueueConfig& c, TokenBucket& bucket, int64_t now_us, int64_t reserved) {
  int64_t allowed = kUnlimited;
  if (c.rate_per_s > 0) {
    const double burst = EffectiveBurst(c);
    if (bucket.at_us == Clock::kNever) {  // never used: full
      bucket.tokens = burst;
      bucket.at_us = now_us;
    } else if (now_us > bucket.at_us) {
      bucket.tokens = std::min(burst, bucket.tokens + static_cast<double>(now_us - bucket.at_us) * c.rate_per_s / 1e6);
    } else {
      bucket.tokens = std::min(burst, bucket.tokens);  // a smaller burst since, or no time passed
    }
    bucket.at_us = std::max(bucket.at_us, now_us);
    allowed = static_cast<int64_t>(std::floor(bucket.tokens));
  }
  if (c.max_reserved > 0) allowed = std::min(allowed, c.max_reserved - reserved);
  return std::max<int64_t>(allowed, 0);
}

void Take(const QueueConfig& c, TokenBucket& bucket, int64_t n) {
  if (c.rate_per_s > 0) bucket.tokens -= static_cast<double>(n);
}

int64_t NextTokenUs(const QueueConfig& c, const TokenBucket& bucket, int64_t now_us) {
  if (c.rate_per_s <= 0 || bucket.tokens >= 1.0) return now_us;
  const int64_t at = bucket.at_us == Clock::kNever ? now_us : bucket.at_us;  // the time `tokens` is of
  return at + static_cast<int64_t>(std::ceil((1.0 - bucket.tokens) * 1e6 / c.rate_per_s));
}

LatenessSplit SplitLateness(int64_t due_us, int64_t held_since_us, int64_t now_us) {
  if (held_since_us >= now_us) return {now_us - due_us, -1};  // Clock::kNever is the largest
  const int64_t held_from = std::max(due_us, held_since_us);
  return {std::max<int64_t>(0, held_from - due_us), std::max<int64_t>(0, now_us - held_from)};
}

}  // namespace delayq
