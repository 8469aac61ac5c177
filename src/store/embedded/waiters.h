// Reserves waiting for jobs (ReserveRequest::wait_ms), over all queues. Each queue has a line
// of them, first come first served; a waiter leaves when it is served, when its wait runs out,
// or when its caller cancels it. The line holds handles: one whose waiter left is skipped.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "delayq/queue.h"
#include "store/embedded/timeline.h"

namespace delayq {

struct QueueState;

struct Waiter {
  uint64_t handle = 0;
  QueueState* queue = nullptr;
  ReserveRequest request;
  int64_t deadline_mono_us = 0;
  ReserveCallback done;
};

// A queue's line of waiting reserves (their handles).
using WaiterLine = std::deque<uint64_t>;

class Waiters {
 public:
  // Puts a reserve at the end of q's line until deadline_mono_us; its handle (never 0).
  uint64_t Add(QueueState* q, const ReserveRequest& request, int64_t deadline_mono_us, ReserveCallback done);
  // Takes a waiter out wherever it is (nullopt: it left already).
  std::optional<Waiter> Take(uint64_t handle);
  // The first waiter in q's line (nullptr: none), dropping the handles of those that left.
  Waiter* First(QueueState* q);
  // Takes the first waiter out of q's line (First must have found one).
  Waiter TakeFirst(QueueState* q);
  // Takes out the waiters whose wait ran out by mono_us, earliest first.
  std::vector<Waiter> TimedOut(int64_t mono_us);
  // Takes every waiter out (the store closes).
  std::vector<Waiter> TakeAll();
  // Whether a waiter is still in q's line.
  bool AnyIn(const QueueState* q) const;
  // Moves `from`'s line to `to` (the waiters of a deleted queue wait on, on a fresh one).
  void MoveLine(QueueState* from, QueueState* to);
  int64_t NextDeadline() const { return deadlines_.Next(); }
  size_t size() const { return waiters_.size(); }

 private:
  std::unordered_map<uint64_t, Waiter> waiters_;
  Timeline<uint64_t> deadlines_;
  uint64_t next_ = 1;
};

}  // namespace delayq
