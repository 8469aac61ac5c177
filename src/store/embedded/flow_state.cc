#include "store/embedded/flow_state.h"

#include <algorithm>

#include "store/embedded/lease_counts.h"

namespace delayq {

FlowState::Allowance FlowState::Allow(const QueueConfig& config, int32_t max, int64_t ready, const LeaseCounts& leases,
                                      bool plain, int64_t now_wall_us, int64_t now_mono_us) {
  int64_t allowance = delayq::Allowance(config, bucket_, now_mono_us, leases.total());
  const int64_t cap = config.group_max_reserved;
  if (plain && cap > 0) allowance = std::min(allowance, std::max<int64_t>(0, cap - leases.InGroup("")));
  Allowance out;
  out.max = static_cast<int32_t>(std::min<int64_t>(max, allowance));
  if (allowance < std::min<int64_t>(max, ready)) {
    if (limited_since_us_ == Clock::kNever) limited_since_us_ = now_wall_us;
    if (config.rate_per_s > 0 && bucket_.tokens < 1.0) {
      out.next_token_mono_us = NextTokenUs(config, bucket_, now_mono_us);
    }
  } else {
    limited_since_us_ = Clock::kNever;
  }
  return out;
}

void FlowState::GroupHeld(std::string_view group, int64_t now_wall_us) {
  group_limited_since_us_.try_emplace(std::string(group), now_wall_us);
}

void FlowState::GroupNotServed(std::string_view group, int64_t since) {
  if (since == Clock::kNever) return;
  auto [it, added] = group_limited_since_us_.try_emplace(std::string(group), since);
  if (!added) it->second = std::min(it->second, since);
}

int64_t FlowState::GroupServed(std::string_view group) {
  auto held = group_limited_since_us_.find(group);
  if (held == group_limited_since_us_.end()) return Clock::kNever;
  const int64_t since = held->second;
  group_limited_since_us_.erase(held);
  return since;
}

void FlowState::RecordFirstDelivery(LatencyHistogram& lateness, int64_t due_us, int64_t held_since_us,
                                    int64_t now_wall_us) {
  const LatenessSplit split = SplitLateness(due_us, held_since_us, now_wall_us);
  lateness.Record(split.late_us);
  if (split.limit_wait_us >= 0) limit_wait_.Record(split.limit_wait_us);
}

}  // namespace delayq
