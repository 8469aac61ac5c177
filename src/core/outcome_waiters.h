// Waits for outcomes (Queue::WaitOutcomeAsync), the same for every store.
//
// A wait registers the job's id here (and, through Hooks::watch, with a shared store, so acks on
// other servers see it); the store's final transitions (ack, a nack or lease expiry that kills,
// cancel) call Notify for a registered id, and one thread reads the job again and answers. Nothing
// polls: a wait is answered by a Notify, or by its deadline with the job as it then is.
//
// The store keeps a job acked while someone waits for it as completed (Limits::kOutcomeHoldMs, see
// CompletedSweepAfterMs), so the re-read finds its result; a job gone when read after its notice
// is answered as it was last seen, in the notice's state (a cancel deletes the job: `cancelled`).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "delayq/queue.h"

namespace delayq {

class OutcomeWaiters {
 public:
  struct Hooks {
    // The store's Get.
    std::function<Result<Job>(std::string_view queue, const JobRef& ref)> get;
    // Tells a shared store that (queue, id) is waited for the next `wait_ms`, so a final transition
    // on any server notifies. Empty for a store that asks Waited() (embedded).
    std::function<Status(std::string_view queue, std::string_view id, int64_t wait_ms)> watch;
  };

  explicit OutcomeWaiters(Hooks hooks);
  ~OutcomeWaiters();
  OutcomeWaiters(const OutcomeWaiters&) = delete;
  OutcomeWaiters& operator=(const OutcomeWaiters&) = delete;

  // Queue::WaitOutcomeAsync.
  uint64_t Wait(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done);
  // Queue::CancelOutcomeWait.
  void Cancel(uint64_t handle);
  // The job may have ended in `state`: its waiters here read it again and are answered. Never
  // blocks on the store (it may be called with the store's locks held); ignored when no one here
  // waits for the job.
  void Notify(std::string_view queue, std::string_view id, JobState state);
  // Every job of `queue` waited for here ended in `state` (its queue was deleted with them).
  void NotifyQueue(std::string_view queue, JobState state);
  // Every job waited for here is read again (its store's notices may have been lost: a
  // reconnection): the final ones answer.
  void Recheck();
  // Whether a wait here names that job (one atomic load while no one waits).
  bool Waited(std::string_view queue, std::string_view id) const;
  // Whether any wait is open here: a hot path asks this before it spells an id for Waited/Notify.
  bool any() const { return count_.load(std::memory_order_relaxed) > 0; }
  // Answers every wait kUnavailable, and later ones the same; ends the thread.
  void Close();

 private:
  using Steady = std::chrono::steady_clock;
  static constexpr int kRetryReadMs = 250;  // a failed read after a notice is tried again after this
  struct Waiter {
    std::string job;  // queue '\0' id
    std::string queue;
    Job last;  // as last read
    Steady::time_point deadline;
    JobCallback done;
    // The store was told of the wait (Hooks::watch): from then on an ack holds the job completed,
    // so a job found gone was cancelled or deleted, and its wait is answered so.
    bool watched = false;
  };
  struct Answer {
    JobCallback done;
    Result<Job> job;
  };

  Hooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Waiter> waiters_;                             // guarded by mu_
  std::unordered_map<std::string, std::vector<uint64_t>> by_job_;  // guarded by mu_
  std::multimap<Steady::time_point, uint64_t> deadlines_;          // guarded by mu_
  std::map<std::string, std::optional<JobState>> notices_;         // guarded by mu_: job -> state
  // Notices whose read failed (the store was briefly unreachable): read again at retry_at_, so a
  // wait is not left to its end because one read failed.
  std::map<std::string, std::optional<JobState>> retries_;  // guarded by mu_
  std::optional<Steady::time_point> retry_at_;              // guarded by mu_
  std::atomic<size_t> count_{0};
  uint64_t next_handle_ = 1;  // guarded by mu_
  bool closed_ = false;       // guarded by mu_
  std::thread thread_;        // started by the first wait that waits

  static std::string JobKey(std::string_view queue, std::string_view id);
  Status AdmitLocked() const;  // why a new wait is refused, or Ok
  uint64_t AddLocked(std::string_view queue, const Job& job, int64_t wait_ms, JobCallback done);
  std::optional<Waiter> TakeLocked(uint64_t handle);
  void Loop();
  void SleepLocked(std::unique_lock<std::mutex>& lock);
  std::map<std::string, std::optional<JobState>> TakeWorkLocked();
  void RetryLocked(const std::string& job, std::optional<JobState> notice);
  std::vector<Answer> Settle(const std::string& job, std::optional<JobState> notice);
};

}  // namespace delayq
