// The scheduler: Tick(now) does everything that time makes due and returns the next deadline;
// the loop sleeps until then or until an operation creates an earlier deadline.
#include <spdlog/spdlog.h>

#include "core/mutant.h"
#include "store/embedded/engine_impl.h"

namespace delayq {
namespace {

constexpr int64_t kRetryAfterErrorUs = 1'000'000;

void AddOnce(std::vector<QueueState*>* touched, QueueState* q) {
  if (touched->empty() || touched->back() != q) touched->push_back(q);
}

}  // namespace

Deadline EngineImpl::TickLocked(const Instant& now, Deferred& deferred) {
  // First: a waiter that timed out may drop its provisional queue, so no queue is collected in
  // `touched` before (their answers come after the lock either way).
  ExpireWaitersLocked(now.mono_us, deferred);
  std::vector<QueueState*> touched;
  // Windows whose refill from disk failed are retried every kRetryAfterErrorUs.
  if (!refill_pending_.empty() && now.mono_us >= refill_retry_mono_us_) {
    for (auto it = refill_pending_.begin(); it != refill_pending_.end();) {
      QueueState* q = *it++;
      if (q->window.empty() && !q->window_complete && RefillLocked(q).ok()) {
        UpdateHeadLocked(q, std::nullopt);
      }
    }
    refill_retry_mono_us_ = Clock::kNever;
  }
  PromoteLocked(now.wall_us, &touched);
  ExpireLeasesLocked(now, &touched);
  while (auto q = flow_wakes_.PopDue(now.mono_us)) touched.push_back(*q);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (QueueState* q : touched) ServeWaitersLocked(q, now, deferred);
  SweepLocked(kDeadSet, now.wall_ms());
  SweepLocked(kCompletedSet, now.wall_ms());

  Deadline next;
  if (!dead_sweeps_.empty()) next.wall_us = dead_sweeps_.Next() * 1000;
  if (!completed_sweeps_.empty()) next.wall_us = std::min(next.wall_us, completed_sweeps_.Next() * 1000);
  if (!heads_.empty()) next.wall_us = std::min(next.wall_us, heads_.begin()->first.due_ms * 1000);
  next.mono_us = std::min({leases_.NextDeadline(), waiters_.NextDeadline(), flow_wakes_.Next()});
  if (!refill_pending_.empty()) {  // a refill failed, here or in an operation since
    if (refill_retry_mono_us_ == Clock::kNever) {
      refill_retry_mono_us_ = now.mono_us + kRetryAfterErrorUs;
      PokeMonoLocked(refill_retry_mono_us_);
    }
    next.mono_us = std::min(next.mono_us, refill_retry_mono_us_);
  }
  return next;
}

void EngineImpl::PromoteLocked(int64_t now_us, std::vector<QueueState*>* touched) {
  if (Mutant("deliver-early")) now_us += 300'000;  // core/mutant.h
  while (!heads_.empty() && heads_.begin()->first.due_ms * 1000 <= now_us) {
    auto [key, q] = *heads_.begin();
    const DueWindow::Popped popped = q->window.PopFront();  // the job at `key`
    --window_entries_;
    q->due_histogram.Add(key.due_ms, -1);
    q->ready.emplace(key, ReadyInfo{popped.attempt, DeliveryToken{}, false,
                                    popped.lane == 0 ? Lane{} : LaneComingDueLocked(q, key, popped.lane)});
    ++ready_entries_;
    if (q->window.empty() && !q->window_complete) {
      RefillOrRetryLocked(q);
    }
    UpdateHeadLocked(q, key);
    AddOnce(touched, q);
  }
}

// A lease that ran out makes its job ready again, with its receipt still valid until someone
// else receives it; when that delivery was the last attempt the job goes dead instead.
void EngineImpl::ExpireLeasesLocked(const Instant& now, std::vector<QueueState*>* touched) {
  const int64_t early_us = Mutant("lease-twice") ? 1'000'000 : 0;  // core/mutant.h
  const std::vector<Ulid> expired = leases_.EndedBy(now.mono_us + early_us);
  if (expired.empty()) return;
  const int64_t now_ms = now.wall_ms();
  auto batch = storage_->NewBatch();
  std::vector<std::pair<Ulid, QueueState*>> dying;
  for (const Ulid& id : expired) {
    const Lease& lease = leases_.at(id);
    QueueState* q = lease.queue;
    if (lease.attempt < lease.max_attempts) {
      ++q->counters.redelivered;
      q->ready.emplace(lease.key, ReadyInfo{lease.attempt, lease.delivery, true, lease.lane});
      ++ready_entries_;
      leases_.Remove(id);
      AddOnce(touched, q);
      continue;
    }
    JobRecord record;
    Status s = ReadRecord(*storage_, q->name, id, &lease.key, &record);
    if (!s.ok()) {
      spdlog::error("job {}: reading it to move it to dead failed: {}", id.ToString(), s.ToString());
      continue;  // retried below
    }
    record.last_error =
        fmt::format("lease expired without an ack on attempt {} of {}", lease.attempt, lease.max_attempts);
    DeadTransitionLocked(q, id, &record, lease.attempt, now_ms, *batch);
    dying.emplace_back(id, q);
  }
  if (!dying.empty()) {
    uint64_t seq;
    Status s = WriteLocked(*batch, &seq);
    if (s.ok()) {
      for (auto& [id, q] : dying) {
        leases_.Remove(id);
        --q->live;
        NoteDeathLocked(q, id, now_ms);
        AddOnce(touched, q);  // a lease less: a reserve held back by max_reserved may go on
      }
      return;
    }
    spdlog::error("moving {} jobs with expired leases to dead failed: {}", dying.size(), s.ToString());
  }
  // Leases that could not be handled yet: try again in a second.
  for (const Ulid& id : expired) leases_.Extend(id, now.mono_us + kRetryAfterErrorUs);
}

// Wakes the queue's waiting reserves at mono_us (a token comes), unless planned earlier.
void EngineImpl::PlanFlowWakeLocked(QueueState* q, int64_t mono_us) {
  if (flow_wakes_.SetEarlier(q, mono_us)) PokeMonoLocked(mono_us);
}

void EngineImpl::ExpireWaitersLocked(int64_t now_mono_us, Deferred& deferred) {
  std::vector<QueueState*> left;  // each queue once: dropping a provisional one frees it
  for (Waiter& w : waiters_.TimedOut(now_mono_us)) {
    deferred.Add([done = std::move(w.done)] { done(std::vector<Delivery>{}); });
    left.push_back(w.queue);
  }
  std::sort(left.begin(), left.end());
  left.erase(std::unique(left.begin(), left.end()), left.end());
  for (QueueState* q : left) DropIfUnusedLocked(q);
}

void EngineImpl::ServeWaitersLocked(QueueState* q, const Instant& now, Deferred& deferred) {
  while (!q->ready.empty() && !q->meta.paused) {
    const Waiter* first = waiters_.First(q);
    if (first == nullptr) return;
    const ReserveRequest& r = first->request;
    auto result = ReserveLocked(q, r.max, r.max_bytes, r.lease_ms.value_or(ConfigOf(q).lease_ms), now);
    if (result.ok() && result->empty()) return;
    Waiter w = waiters_.TakeFirst(q);
    if (MutantStrikes("drop-waiter-answer", 20)) continue;  // core/mutant.h: leased, never answered
    deferred.Add([done = std::move(w.done), result = std::move(result)]() mutable { done(std::move(result)); });
  }
  waiters_.First(q);  // drops the handles of waiters that left
}

void EngineImpl::SchedulerLoop() {
  while (true) {
    Deferred deferred;  // declared before the lock: runs after it is released
    std::unique_lock lock(mu_);
    if (closed_) return;
    if (!storage_->Healthy()) HealLocked(deferred);  // service resumes without waiting for a client
    wake_at_ = TickLocked(NowLocked(), deferred);
    if (!storage_->Healthy()) wake_at_.mono_us = std::min(wake_at_.mono_us, NowLocked().mono_us + kRetryAfterErrorUs);
    poked_ = false;
    if (!deferred.empty()) continue;  // answer the waiters first, then look again
    auto wait = clock_->RealTimeUntil(wake_at_.wall_us, wake_at_.mono_us);
    if (wait.count() > 0) cv_.wait_for(lock, wait, [this] { return poked_ || closed_; });
  }
}

}  // namespace delayq
