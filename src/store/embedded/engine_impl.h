// The embedded engine.
//
// Every live job is one entry in `due`, holding its record while the job is still where it was
// made (records.h); a dead job is its record in `jobs` plus one entry in `dead`. Each operation
// runs under one mutex (Op, engine_op.h): it catches up with the clock (TickLocked: promote what
// came due, end leases, time out waiters), reads what it needs, builds one WriteBatch, writes it,
// and only when the write succeeded applies the change to memory; outside the mutex it then waits,
// in `sync` mode, for the group commit. A failed write leaves memory and disk as they were.
//
// Memory holds each queue's state (queue_state.h), and over all queues the leases (lease_table.h),
// the waiting reserves (waiters.h), and `heads_`: each window's first entry, so the next due job
// is heads_.begin(). The scheduler thread sleeps until the earliest deadline of all these, or
// until an operation makes an earlier one or the wall clock steps.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "core/outcome_waiters.h"
#include "core/receipt.h"
#include "core/receipt_signer.h"
#include "core/record.h"
#include "core/ulid.h"
#include "delayq/engine.h"
#include "schedule/schedule_store.h"
#include "store/embedded/dead_sweeps.h"
#include "store/embedded/deferred.h"
#include "store/embedded/enqueue_plan.h"
#include "store/embedded/group_commit.h"
#include "store/embedded/instant.h"
#include "store/embedded/kept_keys.h"
#include "store/embedded/keys.h"
#include "store/embedded/lease_table.h"
#include "store/embedded/queue_state.h"
#include "store/embedded/records.h"
#include "store/embedded/reserve_plan.h"
#include "store/embedded/storage.h"
#include "store/embedded/timeline.h"
#include "store/embedded/waiters.h"

namespace delayq {

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineOptions& options, std::unique_ptr<Storage> storage);
  ~EngineImpl() override;

  Status Start();  // recovers memory from the store and starts the threads

  Result<EnqueueResult> Enqueue(std::string_view queue, const EnqueueRequest& request) override;
  Result<std::vector<EnqueueResult>> EnqueueBatch(std::string_view queue,
                                                  std::span<const EnqueueRequest> requests) override;
  void EnqueueAsync(std::string_view queue, const EnqueueRequest& request, EnqueueOneCallback done) override;
  void EnqueueBatchAsync(std::string_view queue, std::span<const EnqueueRequest> requests,
                         EnqueueCallback done) override;
  Result<Job> Get(std::string_view queue, const JobRef& ref) override;
  Status Cancel(std::string_view queue, const JobRef& ref) override;
  Result<Job> Reschedule(std::string_view queue, const JobRef& ref, const When& when) override;
  void CancelAsync(std::string_view queue, const JobRef& ref, CancelCallback done) override;
  void RescheduleAsync(std::string_view queue, const JobRef& ref, const When& when, JobCallback done) override;
  Result<std::vector<Delivery>> Reserve(std::string_view queue, const ReserveRequest& request) override;
  uint64_t ReserveAsync(std::string_view queue, const ReserveRequest& request, ReserveCallback done) override;
  void CancelReserve(uint64_t handle) override;
  using Queue::AckBatch;
  using Queue::AckBatchAsync;
  std::vector<Status> AckBatch(std::string_view queue, std::span<const AckRequest> requests) override;
  void AckBatchAsync(std::string_view queue, std::span<const AckRequest> requests, AckCallback done) override;
  std::vector<Status> ReleaseBatch(std::string_view queue, std::span<const std::string> receipts) override;
  Result<NackResult> Nack(std::string_view queue, const NackRequest& request) override;
  using Queue::Touch;
  Result<TouchResult> Touch(std::string_view queue, const TouchRequest& request) override;
  void NackAsync(std::string_view queue, const NackRequest& request, NackCallback done) override;
  void TouchAsync(std::string_view queue, const TouchRequest& request, TouchCallback done) override;
  Result<JobPage> ListJobs(std::string_view queue, const ListRequest& request) override;
  Result<int64_t> ReplayDead(std::string_view queue, std::span<const std::string> ids) override;
  Result<int64_t> PurgeDead(std::string_view queue) override;
  Result<QueueStats> Stats(std::string_view queue) override;
  Result<std::vector<QueueStats>> ListQueues() override;
  Result<ScheduleHistogram> Schedule(std::string_view queue, int64_t bucket_ms, int32_t buckets) override;
  Result<QueueConfig> GetConfig(std::string_view queue) override;
  Status SetConfig(std::string_view queue, const QueueConfig& config) override;
  Result<int64_t> DeleteQueue(std::string_view queue, bool force) override;
  Status Pause(std::string_view queue) override;
  Status Resume(std::string_view queue) override;
  // The rows its recurring schedules are kept in (engine_schedules.cc; ScheduledQueue runs them).
  ScheduleStore& schedule_rows();  // made at the first call, before any other thread has the engine

  Status Health() override;
  uint64_t WaitOutcomeAsync(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) override;
  void CancelOutcomeWait(uint64_t handle) override;
  void Close() override;
  bool Ready() const override { return true; }
  EngineInfo Info() override;

 private:
  class Op;  // one operation on the engine, from its first line to its answer (engine_op.h)
  Instant NowLocked() const { return {clock_->NowUs(), clock_->MonoUs()}; }

  class ScheduleRows;  // engine_schedules.cc
  class Lister;        // engine_browse.cc: ListJobs per state

  // --- queues (engine.cc) ---
  QueueState* FindQueueLocked(std::string_view name);            // a queue (never a provisional one)
  QueueState* GetOrCreateQueueLocked(std::string_view name);     // no limit: recovery
  Status RoomForQueueLocked(std::string_view name);              // kResourceExhausted: max_queues
  Result<QueueState*> CreateQueueLocked(std::string_view name);  // RoomForQueueLocked first
  QueueState* QueueForWaiterLocked(std::string_view name);       // or a provisional one
  void DropIfUnusedLocked(QueueState* q);                        // a provisional one no one waits on
  size_t queue_count_ = 0;                                       // queues, not counting provisional ones
  const QueueConfig& ConfigOf(const QueueState* q) const { return q->ConfigOr(options_.default_queue_config); }
  Status CheckOpenLocked() const;
  Status LoadReceiptSecretLocked();
  Status PersistMetaLocked(Op& op, QueueState* q, const QueueMeta& meta);
  Status SetPaused(std::string_view queue, bool paused);  // engine_queues.cc

  // --- placement of live jobs in memory (engine_index.cc) ---
  void PlaceLocked(QueueState* q, const DueKey& key, int32_t attempt, DeliveryToken delivery, bool redelivery,
                   int64_t now_us, Lane lane);
  void UnplaceLocked(QueueState* q, const DueKey& key);
  void WindowInsertLocked(QueueState* q, const DueKey& key, int32_t attempt, uint8_t lane);
  Lane LaneComingDueLocked(QueueState* q, const DueKey& key, uint8_t lane_byte);
  void GroupsLocked(const QueueState* q, QueueStats* s) const;  // QueueStats::groups
  bool GroupFullLocked(const QueueState* q, std::string_view group, int64_t cap, int64_t extra) const;
  void WindowEraseLocked(QueueState* q, const DueKey& key);
  void UpdateHeadLocked(QueueState* q, const std::optional<DueKey>& old_head);
  Status RefillLocked(QueueState* q);
  void RefillOrRetryLocked(QueueState* q);
  void EvictLocked();
  void AddLeaseLocked(const Ulid& id, Lease lease);  // and wakes the scheduler for its end
  void PokeWallLocked(int64_t wall_us);              // wakes the scheduler when earlier than it planned
  void PokeMonoLocked(int64_t mono_us);

  // --- the scheduler (engine_scheduler.cc) ---
  Deadline TickLocked(const Instant& now, Deferred& deferred);
  void PromoteLocked(int64_t now_us, std::vector<QueueState*>* touched);
  void ExpireLeasesLocked(const Instant& now, std::vector<QueueState*>* touched);
  void ExpireWaitersLocked(int64_t now_mono_us, Deferred& deferred);
  void ServeWaitersLocked(QueueState* q, const Instant& now, Deferred& deferred);
  void PlanFlowWakeLocked(QueueState* q, int64_t mono_us);
  // --- dead letters (engine_dead.cc) ---
  void NoteDeathLocked(QueueState* q, const Ulid& id, int64_t dead_at_ms);
  // --- the sweeps of what a queue keeps for a while (engine_sweeps.cc) ---
  // Dead jobs (dead_retention_ms) or completed ones (keep_completed_ms): where each is counted,
  // indexed by time and recorded.
  struct KeptSet {
    const char* what;  // for the log: "dead jobs past their retention (...)"
    DeadSweeps EngineImpl::*sweeps;
    int64_t QueueState::*count;
    int64_t QueueState::*floor_ms;
    int64_t (*keep_ms)(const QueueConfig& config);  // how long after its time a job is kept
    Cf cf;  // the time index: queue \0 time(be64) id(16) after `skip` bytes, in [begin, end)
    std::string (*begin)(std::string_view queue);
    std::string (*end)(std::string_view queue);
    size_t skip;
    std::string (*record_key)(const Ulid& id);  // the job's record in `jobs`
  };
  static const KeptSet kDeadSet, kCompletedSet;
  void PlanSweepLocked(const KeptSet& set, QueueState* q);
  void SweepLocked(const KeptSet& set, int64_t now_ms);
  // --- completed jobs kept (engine_completed.cc) ---
  // Puts into `batch` the acked job `t` kept as completed with `result` (its record read into
  // `record` first).
  Status PutCompletedLocked(QueueState* q, const ReceiptTarget& t, JobRecord& record,
                            const std::optional<std::string>& result, int64_t now_ms, WriteBatch& batch);
  void NoteCompletedLocked(QueueState* q, const Ulid& id, int64_t completed_at_ms);
  // The completed job `ref` names (by id; by key while a kept key names it). kNotFound: none.
  Status ResolveCompletedLocked(QueueState* q, const JobRef& ref, Ulid* id, JobRecord* record);
  Status DeleteCompletedLocked(Op& op, QueueState* q, const Ulid& id, const JobRecord& record);
  void SchedulerLoop();

  // --- operations (engine_jobs.cc, engine_delivery.cc, engine_queues.cc) ---
  // A reserve: flow control's allowance, then a plan (in due order, or in ready order when jobs
  // have priorities or groups), then applied once its batch is written (reserve_plan.h).
  Result<std::vector<Delivery>> ReserveLocked(QueueState* q, int32_t max, int64_t max_bytes, int64_t lease_ms,
                                              const Instant& now);
  int32_t ReserveAllowanceLocked(QueueState* q, const QueueConfig& config, int32_t max, const Instant& now);
  Status PlanDueOrderLocked(QueueState* q, ReservePlan& plan);
  Status PlanReadyOrderLocked(QueueState* q, const QueueConfig& config, const Instant& now, ReservePlan& plan);
  // Picks of one chunk in ready order, before their records are read (PlanReadyOrderLocked).
  struct OrderedChunk {
    std::vector<ReadyJobs::iterator> its;
    std::vector<DueKey> keys;
    std::vector<std::string> groups;
    std::vector<bool> first_of_group;  // the plan's first pick of its group (it noted group_since)
  };
  OrderedChunk TakeOrderedChunkLocked(QueueState* q, const Instant& now, const ReadyOrderRules& rules,
                                      ReservePlan& plan, size_t chunk);
  void PutBackLocked(QueueState* q, ReservePlan& plan, const OrderedChunk& taken, size_t from);
  Result<bool> PlanPickLocked(QueueState* q, ReservePlan& plan, ReadyJobs::iterator it, const std::string& raw,
                              const Status& read, bool in_due);
  Status ApplyReserveLocked(QueueState* q, const QueueConfig& config, ReservePlan& plan, const Instant& now);
  Status LocateReceiptLocked(QueueState* q, const Receipt& receipt, ReceiptTarget* target, JobRecord* record,
                             bool* have_record);
  using DeliveryFn = std::function<Status(size_t i, const ReceiptTarget& t, JobRecord& record)>;
  void ForEachDeliveryLocked(QueueState* q, const std::vector<Result<Receipt>>& parsed,
                             const std::vector<size_t>& first, std::vector<ReceiptTarget>& targets,
                             std::vector<Status>& out, const DeliveryFn& fn);
  Status ResolveRefLocked(QueueState* q, const JobRef& ref, Ulid* id, JobRecord* record, bool* in_due = nullptr);
  Result<Job> JobViewLocked(QueueState* q, const Ulid& id, const JobRecord& record);
  void DeadTransitionLocked(QueueState* q, const Ulid& id, JobRecord* record, int32_t attempt, int64_t now_ms,
                            WriteBatch& batch);
  Status WriteLocked(WriteBatch& batch, uint64_t* seq);
  Status WaitDurable(uint64_t seq);
  void WhenDurable(uint64_t seq, std::function<void(Status)> done);
  Result<std::vector<EnqueueResult>> EnqueueImpl(std::string_view queue, std::span<const EnqueueRequest> requests,
                                                 bool batch);
  void EnqueueAsyncImpl(std::string_view queue, std::span<const EnqueueRequest> requests, bool is_batch,
                        EnqueueCallback done);
  // The locked parts (...Locked(Op&, ...)) are written, not yet durable: the caller finishes `op`.
  Result<std::vector<EnqueueResult>> EnqueueLocked(Op& op, std::string_view queue,
                                                   std::span<const EnqueueRequest> requests, bool is_batch);
  void AckBatchLocked(Op& op, std::string_view queue, std::span<const AckRequest> requests,
                      const std::vector<Result<Receipt>>& parsed, const std::vector<size_t>& first,
                      std::vector<Status>& out);
  Status CancelLocked(Op& op, std::string_view queue, const JobRef& ref);
  Result<Job> RescheduleLocked(Op& op, std::string_view queue, const JobRef& ref, const When& when);
  Result<NackResult> NackLocked(Op& op, std::string_view queue, const NackRequest& request,
                                const Result<Receipt>& receipt);
  Result<TouchResult> TouchLocked(Op& op, std::string_view queue, const Result<Receipt>& receipt,
                                  const TouchRequest& request);
  // The progress a reserved job's due entry holds (empty when none).
  Result<std::string> ProgressLocked(std::string_view queue, const DueKey& key);
  template <typename T>
  static void FinishWith(Op& op, Result<T> result, std::function<void(Result<T>)> done);  // engine_op.h
  Result<EnqueuePlan> PlanEnqueueLocked(std::string_view queue, const QueueConfig& config,
                                        std::span<const EnqueueRequest> requests, bool is_batch, int64_t now_ms);
  Result<bool> PlanTakenKeyLocked(std::string_view queue, const EnqueueRequest& r, const std::string& idem,
                                  int64_t due_ms, int64_t now_ms, bool is_batch, size_t i, EnqueuePlan& plan);
  void ApplyEnqueueLocked(QueueState* q, const EnqueuePlan& plan, const Instant& now);
  QueueStats StatsLocked(QueueState* q, const Instant& now);

  class Recovery;  // engine_recovery.cc: RecoverLocked's passes
  Status RecoverLocked();
  void HealLocked(Deferred& deferred);

  const EngineOptions options_;
  std::shared_ptr<Clock> clock_;
  std::optional<ReceiptSigner> signer_;  // set in Start, before any operation (then read-only)
  std::unique_ptr<Storage> storage_;
  GroupCommit commit_;

  std::mutex mu_;
  // Operations' use of mu_ (EngineInfo); under mu_. The scheduler thread's own turns are not
  // counted (they are short: TickLocked), though an operation's wait for one is.
  struct LockStats {
    uint64_t acquisitions = 0, contended = 0, wait_ns = 0, held_ns = 0;
  } lock_stats_;
  std::condition_variable cv_;  // the scheduler's sleep
  bool closed_ = false;
  bool poked_ = false;
  Deadline wake_at_;  // when the scheduler plans to wake up
  uint64_t write_seq_ = 0;

  std::map<std::string, std::unique_ptr<QueueState>, std::less<>> queues_;
  std::set<std::pair<DueKey, QueueState*>> heads_;
  std::set<QueueState*> refill_pending_;  // windows whose refill failed; retried each second
  int64_t refill_retry_mono_us_ = Clock::kNever;
  size_t window_entries_ = 0;
  size_t ready_entries_ = 0;
  LeaseTable leases_;
  Waiters waiters_;
  // Waits for an outcome (core/outcome_waiters.h): an ack, a death or a cancel of a job one names
  // notifies it (after its write); an ack keeps the job completed for it.
  OutcomeWaiters outcomes_;
  DeadSweeps dead_sweeps_;       // wall ms
  DeadSweeps completed_sweeps_;  // wall ms: the same rule, for keep_completed_ms
  // (mono µs): when a rate-limited queue has a token again for its waiting reserves.
  KeyedTimeline<QueueState*> flow_wakes_;

  UlidGenerator ids_;
  std::mt19937_64 rng_;  // back-off jitter only (receipts come from the OS CSPRNG)
  std::thread scheduler_;
  uint64_t clock_listener_ = 0;
  std::unique_ptr<ScheduleStore> schedule_rows_;
};

inline Status UnknownQueue(std::string_view name) { return errors::UnknownQueue(name); }

// Opens an engine on a given storage (the fault seam for tests).
Result<std::unique_ptr<Engine>> OpenEngineOnStorage(const EngineOptions& options, std::unique_ptr<Storage> storage);

}  // namespace delayq

#include "store/embedded/engine_op.h"  // IWYU pragma: export
