// A queue's scheduled jobs counted per minute of due time: what the due-time histogram route
// (Queue::Schedule, GET /v1/queues/{q}/schedule) answers from. Not the recurring schedules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>

#include "delayq/job.h"

namespace delayq {

class DueHistogram {
 public:
  void Add(int64_t due_ms, int64_t delta) {
    auto it = minutes_.try_emplace(due_ms / 60'000, 0).first;
    it->second += delta;
    if (it->second <= 0) minutes_.erase(it);
  }
  // `buckets` buckets of bucket_ms from the minute of now_ms, and the jobs due after them.
  ScheduleHistogram Buckets(int64_t now_ms, int64_t bucket_ms, int32_t buckets) const {
    ScheduleHistogram h;
    h.start_ms = now_ms / 60'000 * 60'000;
    h.bucket_ms = bucket_ms;
    h.buckets.assign(static_cast<size_t>(buckets), 0);
    for (const auto& [minute, count] : minutes_) {
      const int64_t offset = std::max<int64_t>(0, minute * 60'000 - h.start_ms) / bucket_ms;
      if (offset < buckets) {
        h.buckets[static_cast<size_t>(offset)] += count;
      } else {
        h.later += count;
      }
    }
    return h;
  }
  void clear() { minutes_.clear(); }

 private:
  std::map<int64_t, int64_t> minutes_;  // minute -> scheduled jobs due in it
};

}  // namespace delayq
