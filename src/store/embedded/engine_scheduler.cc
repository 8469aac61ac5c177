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
  while (!flow_wakes_.empty() && flow_wakes_.begin()->first <= now.mono_us) {
    QueueState* q = flow_wakes_.begin()->second;
    flow_wakes_.erase(flow_wakes_.begin());
    q->flow_wake_mono_us = Clock::kNever;
    touched.push_back(q);
  }
  ExpireWaitersLocked(now.mono_us, deferred);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (QueueState* q : touched) ServeWaitersLocked(q, now, deferred);
  SweepDeadLocked(now.wall_ms());

  Deadline next;
  if (!dead_sweeps_.empty()) next.wall_us = dead_sweeps_.begin()->first * 1000;
  if (!heads_.empty()) next.wall_us = std::min(next.wall_us, heads_.begin()->first.due_ms * 1000);
  if (!lease_deadlines_.empty()) next.mono_us = lease_deadlines_.begin()->first;
  if (!waiter_deadlines_.empty()) next.mono_us = std::min(next.mono_us, waiter_deadlines_.begin()->first);
  if (!flow_wakes_.empty()) next.mono_us = std::min(next.mono_us, flow_wakes_.begin()->first);
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
    ScheduleCountLocked(q, key.due_ms, -1);
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
  std::vector<Ulid> expired;
  const int64_t early_us = Mutant("lease-twice") ? 1'000'000 : 0;  // core/mutant.h
  for (auto it = lease_deadlines_.begin(); it != lease_deadlines_.end() && it->first <= now.mono_us + early_us; ++it) {
    expired.push_back(it->second);
  }
  if (expired.empty()) return;
  const int64_t now_ms = now.wall_ms();
  auto batch = storage_->NewBatch();
  std::vector<std::pair<Ulid, QueueState*>> dying;
  for (const Ulid& id : expired) {
    Lease& lease = leases_.at(id);
    QueueState* q = lease.queue;
    if (lease.attempt < lease.max_attempts) {
      ++q->counters.redelivered;
      q->ready.emplace(lease.key, ReadyInfo{lease.attempt, lease.delivery, true, lease.lane});
      ++ready_entries_;
      RemoveLeaseLocked(id);
      AddOnce(touched, q);
      continue;
    }
    JobRecord record;
    Status s = ReadRecordLocked(q->name, id, &lease.key, &record);
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
        RemoveLeaseLocked(id);
        --q->live;
        NoteDeathLocked(q, now_ms);
        AddOnce(touched, q);  // a lease less: a reserve held back by max_reserved may go on
      }
      return;
    }
    spdlog::error("moving {} jobs with expired leases to dead failed: {}", dying.size(), s.ToString());
  }
  // Leases that could not be handled yet: try again in a second.
  for (const Ulid& id : expired) {
    auto it = leases_.find(id);
    if (it == leases_.end()) continue;
    lease_deadlines_.erase({it->second.deadline_mono_us, id});
    it->second.deadline_mono_us = now.mono_us + kRetryAfterErrorUs;
    lease_deadlines_.emplace(it->second.deadline_mono_us, id);
  }
}

void EngineImpl::PlanFlowWakeLocked(QueueState* q, int64_t mono_us) {
  if (q->flow_wake_mono_us != Clock::kNever && q->flow_wake_mono_us <= mono_us) return;
  DropFlowWakeLocked(q);
  q->flow_wake_mono_us = mono_us;
  flow_wakes_.emplace(mono_us, q);
  PokeMonoLocked(mono_us);
}

void EngineImpl::DropFlowWakeLocked(QueueState* q) {
  if (q->flow_wake_mono_us == Clock::kNever) return;
  flow_wakes_.erase({q->flow_wake_mono_us, q});
  q->flow_wake_mono_us = Clock::kNever;
}

void EngineImpl::ExpireWaitersLocked(int64_t now_mono_us, Deferred& deferred) {
  while (!waiter_deadlines_.empty() && waiter_deadlines_.begin()->first <= now_mono_us) {
    uint64_t handle = waiter_deadlines_.begin()->second;
    waiter_deadlines_.erase(waiter_deadlines_.begin());
    auto it = waiters_.find(handle);
    if (it == waiters_.end()) continue;
    deferred.Add([done = std::move(it->second.done)] { done(std::vector<Delivery>{}); });
    QueueState* q = it->second.queue;
    waiters_.erase(it);  // its handle in the queue's deque is skipped later
    DropIfUnusedLocked(q);
  }
}

void EngineImpl::ServeWaitersLocked(QueueState* q, const Instant& now, Deferred& deferred) {
  while (!q->waiters.empty() && !q->ready.empty() && !q->meta.paused) {
    uint64_t handle = q->waiters.front();
    auto it = waiters_.find(handle);
    if (it == waiters_.end()) {
      q->waiters.pop_front();
      continue;
    }
    Waiter& w = it->second;
    int64_t lease_ms = w.request.lease_ms.value_or(ConfigOf(q).lease_ms);
    auto result = ReserveLocked(q, w.request.max, w.request.max_bytes, lease_ms, now);
    if (result.ok() && result->empty()) return;
    q->waiters.pop_front();
    waiter_deadlines_.erase({w.deadline_mono_us, handle});
    if (MutantStrikes("drop-waiter-answer", 20)) {  // core/mutant.h: leased, never answered
      waiters_.erase(it);
      continue;
    }
    deferred.Add([done = std::move(w.done), result = std::move(result)]() mutable { done(std::move(result)); });
    waiters_.erase(it);
  }
  while (!q->waiters.empty() && !waiters_.contains(q->waiters.front())) q->waiters.pop_front();
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
