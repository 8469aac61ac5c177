// One queue's flow control in memory (core/flow_control.h has the rules): its token bucket on
// the monotonic clock (full at start, not persisted), since when a limit has held ready jobs back
// from a reserve that asked for them (the whole queue's, and each group's at group_max_reserved),
// and how long first deliveries were held back (limit_wait). A held job's lateness stops when a
// limit starts holding it (SplitLateness).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/flow_control.h"
#include "core/histogram.h"
#include "delayq/clock.h"

namespace delayq {

class LeaseCounts;

class FlowState {
 public:
  struct Allowance {
    int32_t max = 0;                             // jobs the reserve may take
    int64_t next_token_mono_us = Clock::kNever;  // when the rate held it back: the next token
  };
  // What a reserve of `max` may take of `ready` jobs now: the bucket and max_reserved, and, when
  // every ready job is in the default group (`plain`), that group's cap. Less than it asks for and
  // finds: the limit holds jobs back from now on; else nothing is held back.
  Allowance Allow(const QueueConfig& config, int32_t max, int64_t ready, const LeaseCounts& leases, bool plain,
                  int64_t now_wall_us, int64_t now_mono_us);
  // Takes `n` delivered jobs out of the bucket (after Allow at the same moment).
  void Took(const QueueConfig& config, int64_t n) { Take(config, bucket_, n); }
  // Since when the queue's limits held jobs back (Clock::kNever: they do not).
  int64_t limited_since_us() const { return limited_since_us_; }
  // A group at its cap with ready jobs is held back from now on (unless it already was).
  void GroupHeld(std::string_view group, int64_t now_wall_us);
  // The group is served: since when it was held back (Clock::kNever: it was not), forgotten.
  int64_t GroupServed(std::string_view group);
  // Undoes GroupServed for a pick put back: held back since `since` again (the earlier time, if
  // it was noted anew meanwhile); nothing for Clock::kNever.
  void GroupNotServed(std::string_view group, int64_t since);
  // A first delivery, due at due_us and held back by a limit since held_since_us (Clock::kNever:
  // not held): its lateness goes to `lateness`, its wait for the limit to limit_wait.
  void RecordFirstDelivery(LatencyHistogram& lateness, int64_t due_us, int64_t held_since_us, int64_t now_wall_us);
  const LatencyHistogram& limit_wait() const { return limit_wait_; }

 private:
  TokenBucket bucket_;
  int64_t limited_since_us_ = Clock::kNever;
  std::map<std::string, int64_t, std::less<>> group_limited_since_us_;
  LatencyHistogram limit_wait_;
};

}  // namespace delayq
