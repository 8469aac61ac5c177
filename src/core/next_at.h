// When a store's scheduler next has something to do (a job comes due, a lease runs out, a dead
// job's retention ends), on the store's clock; Clock::kNever: nothing.
//
// The scheduler learns it two ways: from what a statement or script read of the store (an
// answer), and from notes (this process's own reserve, a wake message). A note can come between
// the read and its answer being taken in, and must not be overwritten by that older answer: that
// stranded a lease or a retry until the safety interval, on Redis and then on PostgreSQL. So the
// notes since the read was launched are kept apart and merged into its answer: a read launched
// after a note saw what the note announced.
#pragma once

#include <algorithm>
#include <cstdint>

#include "delayq/clock.h"

namespace delayq {

struct NextAt {
  int64_t at = Clock::kNever;
  int64_t noted = Clock::kNever;  // the earliest note since Launched()

  // Returns whether it moved `at` earlier (the scheduler must look again).
  bool Note(int64_t t) {
    noted = std::min(noted, t);
    if (at <= t) return false;
    at = t;
    return true;
  }
  // Call before launching the read whose answer will come to Answered().
  void Launched() { noted = Clock::kNever; }
  // The read's answer; below 0 (or Clock::kNever): nothing is coming.
  void Answered(int64_t t) { at = std::min(t < 0 ? Clock::kNever : t, noted); }
  bool By(int64_t now) const { return at <= now; }
};

}  // namespace delayq
