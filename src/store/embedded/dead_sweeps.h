// When each queue's dead jobs are next swept for retention. A dead job is deleted once
// dead_retention_ms has passed since it went dead, never before: a queue's sweep is planned for
// the moment its oldest dead job runs out (`floor_ms` is a lower bound of that death, so a sweep
// may find nothing and plan again from the oldest it sees). The Redis store's twin is the
// dead_expire script, planned by the same rule.
#pragma once

#include <cstdint>
#include <optional>

#include "delayq/clock.h"
#include "store/embedded/timeline.h"

namespace delayq {

struct QueueState;

class DeadSweeps {
 public:
  // Plans q's sweep for its `dead` jobs, the oldest dead since floor_ms (Clock::kNever: unknown,
  // none planned), kept retention_ms.
  void Plan(QueueState* q, int64_t dead, int64_t floor_ms, int64_t retention_ms) {
    if (dead == 0 || floor_ms == Clock::kNever) return Drop(q);
    at_.Set(q, floor_ms + retention_ms);
  }
  // Sweeps q again at at_ms (its last sweep failed).
  void Retry(QueueState* q, int64_t at_ms) { at_.Set(q, at_ms); }
  void Drop(QueueState* q) { at_.Erase(q); }
  // A queue whose sweep is due by now_ms (it stays planned until planned again or dropped).
  std::optional<QueueState*> Due(int64_t now_ms) const {
    if (at_.Next() > now_ms) return std::nullopt;
    return at_.First();
  }
  int64_t At(QueueState* q) const { return at_.At(q); }
  int64_t Next() const { return at_.Next(); }
  bool empty() const { return at_.empty(); }
  void clear() { at_.clear(); }

 private:
  KeyedTimeline<QueueState*> at_;
};

}  // namespace delayq
