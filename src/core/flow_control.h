// Flow control of a queue's deliveries (docs/http-api.md, Flow control): a token bucket (`rate_per_s`, `burst`) and a
// cap on the jobs leased at once (`max_reserved`). A reserve hands out at most Allowance() jobs
// and then Take()s them. The Redis store's reserve script is the twin of this arithmetic (the
// same doubles in the same order; RedisScripts.TheLuaTokenBucketIsTheCppOne compares them).
#pragma once

#include <cstdint>

#include "delayq/clock.h"
#include "delayq/job.h"

namespace delayq {

// The bucket's state: `tokens` at `at_us` (a clock in µs). at_us Clock::kNever: never used (full).
struct TokenBucket {
  double tokens = 0;
  int64_t at_us = Clock::kNever;
};

// The bucket size in force: `burst`, or when that is 0 the rate rounded up (at least 1).
double EffectiveBurst(const QueueConfig& config);

// Refills `bucket` to now_us and returns how many jobs a reserve may hand out now: the whole
// tokens in the bucket (unlimited when rate_per_s is 0) and the room under max_reserved with
// `reserved` jobs leased (unlimited when max_reserved is 0), whichever is smaller; never below 0.
// kUnlimited when neither limit is set.
inline constexpr int64_t kUnlimited = INT64_MAX;
int64_t Allowance(const QueueConfig& config, TokenBucket& bucket, int64_t now_us, int64_t reserved);

// Whether leases are capped (max_reserved or group_max_reserved): then a lease that ends may let
// a waiting reserve go on.
inline bool HasLeaseCaps(const QueueConfig& c) { return c.max_reserved > 0 || c.group_max_reserved > 0; }

// Takes `n` delivered jobs out of the bucket (after Allowance at the same now_us).
void Take(const QueueConfig& config, TokenBucket& bucket, int64_t n);

// When the next whole token is in the bucket (µs, the bucket's clock): now_us when one is.
// Only meaningful with a rate.
int64_t NextTokenUs(const QueueConfig& config, const TokenBucket& bucket, int64_t now_us);

// A first delivery's wait, due at due_us and delivered at now_us: late until a limit (the
// queue's, or its group's cap) started holding it at held_since_us, then held back by the limit
// (not late). held_since_us Clock::kNever (or not before now_us): not held, all of it is lateness
// and limit_wait_us is -1; a held job's parts are never negative (a wall clock that stepped back
// counts 0). The Redis scripts split it the same way (lateness_split in
// src/store/redis/lua/prelude.lua).
struct LatenessSplit {
  int64_t late_us = 0;
  int64_t limit_wait_us = -1;
};
LatenessSplit SplitLateness(int64_t due_us, int64_t held_since_us, int64_t now_us);

// Whether a record of record_bytes still goes into a reserve's answer of `bytes` under max_bytes:
// `first`, it is the answer's first job, which always comes (the Redis reserve script's
// answer_fits is the twin).
inline bool AnswerFits(int64_t bytes, int64_t record_bytes, int64_t max_bytes, bool first) {
  return first || bytes + record_bytes <= max_bytes;
}

}  // namespace delayq
