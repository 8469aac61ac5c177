// The PostgreSQL store (docs/postgres.md): the Queue interface on tables of the schema delayq,
// the embedded and Redis stores' sibling. Several servers may share one database.
//
// How data flows. Every transition is one statement: a function of sql/v1_2_functions.sql
// (enqueue, cancel, reschedule, lease expiry) or sql/v2_1_delivery.sql (reserve, ack; schema
// version 2) or one UPDATE/DELETE that names the
// row and the state it must be in, so two servers never both apply one. Due times and leases are
// on the database's clock (delayq.now_ms()). A job waits in state 's' and is ready once its due
// time has passed: nothing moves it then, so there is no promotion to run late.
//
// Waking. A reserve that finds nothing waits in this process. Every enqueue that makes a job due
// within a minute sends NOTIFY delayq "<queue> <due ms>" at its commit (the SQL API's too); a
// listener thread hears it and the scheduler thread serves the queue's waiting reserves at that
// due time. A notification can be lost (a reconnect), so each queue with waiters is also looked
// at every safety_interval_ms. The scheduler also ends the leases that ran out (delayq._reap)
// and deletes dead jobs past their queue's retention.
//
// Files: postgres_queue.cc (lifecycle, configs, receipts), pg_jobs.cc, pg_delivery.cc,
// pg_browse.cc, pg_admin.cc, pg_scheduler.cc (the scheduler, the listener, waiting reserves),
// pg_schedules.cc; pg_connection.h (libpq), migrate.h (the schema's versions).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/flow_control.h"
#include "core/histogram.h"
#include "core/next_at.h"
#include "core/outcome_waiters.h"
#include "core/receipt.h"
#include "core/receipt_signer.h"
#include "core/ulid.h"
#include "delayq/queue.h"
#include "schedule/runner.h"
#include "schedule/schedule_store.h"
#include "schedule/scheduled_queue.h"
#include "store/postgres/pg_connection.h"

namespace delayq::postgres {

struct PostgresQueueOptions {
  std::string url;  // a libpq URI: postgres://user:password@host:port/db?sslmode=...
  // Connections this server opens, all of them at start (statements beyond wait for one), and
  // one more for LISTEN. Default 16.
  size_t pool_size = 16;
  int connect_timeout_s = 5;
  // The longest a lost notification can delay a waiting reserve, a lease's end or a dead job's
  // deletion. Default 1000.
  int64_t safety_interval_ms = 1000;
  bool migrate = true;  // create or upgrade the schema on open (else refuse one not current)
  // Queues at most (shared by every server of the database: the last one opened sets it).
  // Default 10 000.
  size_t max_queues = 10'000;
  // delayq.jobs is vacuumed by this server (VACUUM (SKIP_LOCKED), on a thread of its own) once it
  // holds more than vacuum_dead_rows dead rows plus a twentieth of its live ones, looking every
  // vacuum_interval_ms: jobs churn faster than autovacuum's minute-long nap keeps up with
  // (docs/postgres.md). 0 rows: leave it to autovacuum. Defaults 10 000 and 1 000 (50 000 and
  // 5 000, with a fifth of the live rows, let 1 M churned jobs beside 100 000 live grow the
  // tables to 2.47x their size; these kept them under 1.6x: bench/results/postgres/churn.md).
  int64_t vacuum_dead_rows = 10'000;
  int64_t vacuum_interval_ms = 1'000;
  ScheduleRunnerOptions schedules;  // recurring schedules (delayq/schedule.h)
  // Tests only: runs on the scheduler thread after a reap read the next lease end, before that
  // answer is taken in (a lease taken meanwhile must not be overwritten by it).
  std::function<void()> after_reap_for_test;
};

class PostgresQueue final : public Queue, private ScheduleStore {
 public:
  // Connects, migrates (or checks) the schema and starts the threads. kUnavailable when the
  // database cannot be reached; kIoError when its schema is newer than this delayq's.
  static Result<std::unique_ptr<PostgresQueue>> Open(const PostgresQueueOptions& options);
  ~PostgresQueue() override;
  // Answers the waiting reserves (empty) and stops the threads. Idempotent.
  void Close();

  Result<EnqueueResult> Enqueue(std::string_view queue, const EnqueueRequest& request) override;
  Result<std::vector<EnqueueResult>> EnqueueBatch(std::string_view queue,
                                                  std::span<const EnqueueRequest> requests) override;
  Result<Job> Get(std::string_view queue, const JobRef& ref) override;
  Status Cancel(std::string_view queue, const JobRef& ref) override;
  Result<Job> Reschedule(std::string_view queue, const JobRef& ref, const When& when) override;
  Result<std::vector<Delivery>> Reserve(std::string_view queue, const ReserveRequest& request) override;
  uint64_t ReserveAsync(std::string_view queue, const ReserveRequest& request, ReserveCallback done) override;
  void CancelReserve(uint64_t handle) override;
  uint64_t WaitOutcomeAsync(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) override;
  void CancelOutcomeWait(uint64_t handle) override { outcomes_.Cancel(handle); }
  using Queue::AckBatch;
  std::vector<Status> AckBatch(std::string_view queue, std::span<const AckRequest> requests) override;
  std::vector<Status> ReleaseBatch(std::string_view queue, std::span<const std::string> receipts) override;
  Result<NackResult> Nack(std::string_view queue, const NackRequest& request) override;
  using Queue::Touch;
  Result<TouchResult> Touch(std::string_view queue, const TouchRequest& request) override;
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
  Status Health() override;

  // The rows its recurring schedules are kept in (ScheduledPostgresQueue runs them).
  ScheduleStore& schedule_rows() { return *this; }
  // The database's clock, in ms since the epoch (one query).
  Result<int64_t> DatabaseNowMs();

  // The due time of `queue`'s next job still to come ($1: the queue), read from the head of the
  // waiting jobs' index: a handful of pages however many jobs wait. The clock is an InitPlan's,
  // read once, so that it bounds the index scan (a min() over the queue's waiting jobs read all of
  // them, 130 ms at 100 000, each time a waiting reserve found nothing ready).
  static constexpr const char* kNextDueSql =
      "SELECT j.due_at_ms FROM delayq.jobs j WHERE j.queue = $1 AND j.state = 's' "
      "AND j.due_at_ms > (SELECT delayq.now_ms()) ORDER BY j.due_at_ms LIMIT 1";

 private:
  // What this server counted of a queue since it opened the store (QueueStats' counters and
  // lateness are this server's).
  struct Metrics {
    QueueCounters counters;
    LatencyHistogram lateness, limit_wait;
  };
  struct CachedConfig {
    QueueConfig config;
    int64_t read_at = 0;  // steady ms
  };
  struct Waiter {
    std::string queue;
    ReserveRequest request;
    int64_t deadline = 0;  // steady ms
    ReserveCallback done;
  };

  explicit PostgresQueue(PostgresQueueOptions options);
  Status Start();
  Status Prepare();
  void WarmPool();
  Status LoadReceiptSecret(Connection& c);

  // --- configs (postgres_queue.cc) ---
  // The queue's config (cached for a second: other servers may change it); kNotFound when no
  // queue has that name.
  Result<QueueConfig> ConfigOf(const std::string& queue);
  void ForgetConfig(const std::string& queue);
  // Runs `sql` on a pooled connection.
  Result<Rows> Exec(std::string_view sql, const std::vector<Param>& params = {});
  // Keeps what statement `n` found unless one that started after it has already said.
  void NoteHealth(uint64_t n, const Status& found);
  // A pooled connection for a transaction of this store's. What it found of the database counts
  // for Health() as a statement's answer does: numbered when taken, noted when it goes back (a
  // connection that broke: the database is away). CI saw an enqueue fail with the database down
  // while Health() still said ok, until the scheduler's next statement.
  class Held {
   public:
    Held(PostgresQueue* q, uint64_t n, Pool::Lease lease) : q_(q), n_(n), lease_(std::move(lease)) {}
    Held(Held&& o) noexcept : q_(std::exchange(o.q_, nullptr)), n_(o.n_), lease_(std::move(o.lease_)) {}
    Held& operator=(Held&&) = delete;
    ~Held() {
      if (q_) q_->NoteHealth(n_, lease_->broken() ? ToStatus(lease_->last_error()) : Status::Ok());
    }
    Connection* operator->() { return lease_.operator->(); }
    Connection& operator*() { return *lease_; }

   private:
    PostgresQueue* q_;
    uint64_t n_;
    Pool::Lease lease_;
  };
  Result<Held> Borrow();
  // Tells every server (and this one) that jobs of `queue` are ready now (a release, a nack or a
  // replay made them so, or a lease ended and made room).
  void AnnounceReady(const std::string& queue);
  Metrics& MetricsLocked(const std::string& queue) { return metrics_[queue]; }

  // --- jobs (pg_jobs.cc) ---
  Result<Job> ToJob(const std::string& queue, const Rows& rows, int row, int64_t now_ms);
  Result<Job> GetById(const std::string& queue, const std::string& id);
  Status Watch(std::string_view queue, std::string_view id, int64_t wait_ms);  // OutcomeWaiters::Hooks::watch
  std::vector<Status> AckValid(std::string_view queue, std::span<const AckRequest> requests);
  Result<Rows> AckRows(const std::string& queue, const std::vector<std::string>& ids,
                       const std::vector<std::string>& tokens, const std::vector<std::optional<std::string>>& results);

  // --- deliveries (pg_delivery.cc) ---
  // A reserve now; when a limit held ready jobs back, *look_again_ms says when a token comes (db
  // ms; Clock::kNever: when a lease ends, which is announced).
  Result<std::vector<Delivery>> ReserveNow(const std::string& queue, const ReserveRequest& request,
                                           int64_t* look_again_ms = nullptr);
  // The reserve of a queue with flow control or ready order (pg_controlled_reserve.cc).
  Result<std::vector<Delivery>> ReserveControlled(const std::string& queue, const ReserveRequest& request,
                                                  int64_t* look_again_ms);
  // The deliveries of reserve rows (delayq._reserve's columns), counted: lateness of first
  // deliveries, split by `splits` where a limit held them (else late since due).
  Result<std::vector<Delivery>> Deliveries(const std::string& queue, const Rows& rows,
                                           const std::map<std::string, LatenessSplit>& splits);
  // The signer of receipts (read under mu_: a copy that stays valid).
  std::shared_ptr<const ReceiptSigner> Signer();
  // ok when `queue` is a valid name of a queue that exists; else why not (kNotFound, ...).
  Status KnownQueue(std::string_view queue);
  // The receipt's delivery, if this store issued it for `queue` (else kInvalidArgument).
  Result<Receipt> OpenReceipt(const std::string& queue, std::string_view receipt);
  // Why a receipt's delivery could not be settled, from the job as it is now.
  Status DeliveryError(const std::string& queue, const std::string& id, const std::string& token);

  // --- schedules (pg_schedules.cc) ---
  Result<std::optional<StoredSchedule>> LoadSchedule(std::string_view queue, std::string_view name) override;
  Result<std::vector<StoredSchedule>> LoadSchedules(std::string_view queue) override;
  Status StoreSchedule(const StoredSchedule& s, uint64_t expected) override;
  Status EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) override;

  // --- the scheduler, the listener and waiting reserves (pg_scheduler.cc) ---
  void SchedulerLoop();
  void ListenerLoop(std::unique_ptr<Connection> first);
  void VacuumLoop();
  bool VacuumDue();
  // One listener connection's life: LISTEN, then notifications until it breaks or the store
  // closes (Ok: the loop connects again at once, or ends); an error when LISTEN itself failed.
  Status Listen(Connection& c);
  void HandleNotification(std::string_view payload);
  // Serves the waiting reserves of `queue` in arrival order while jobs are ready.
  void ServeWaiters(const std::string& queue);
  // Ends the leases that ran out; answers the earliest lease still running (Clock::kNever: none).
  void ReapLeases();
  // Deletes dead jobs past their retention and kept keys past their time.
  void Sweep();
  void MeasureClock();
  // The scheduler's view of the database's clock, in ms.
  int64_t DbNowLocked() const;
  void NoteLease(int64_t deadline_ms);
  // A job of `queue` went dead at dead_at_ms: the sweep deletes it once its retention has run out.
  void NoteDeath(const std::string& queue, int64_t dead_at_ms);
  void Poke();

  const PostgresQueueOptions options_;
  Pool pool_;
  // Waits for an outcome (core/outcome_waiters.h): delayq._watch notes each job waited for, the
  // listener's "outcome <state> <id> <queue>" (from any server's transactions) wakes them here.
  OutcomeWaiters outcomes_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // Close() began: the threads end, waiters are answered
  bool closed_ = false;    // the threads have ended: statements are refused
  bool poked_ = false;
  Status health_;                  // what the latest borrowed connection found (Health())
  uint64_t statements_ = 0;        // connections borrowed, each numbered when taken (Borrow)
  uint64_t health_statement_ = 0;  // the number of the borrowing health_ is from
  std::map<std::string, CachedConfig, std::less<>> configs_;
  std::map<std::string, Metrics, std::less<>> metrics_;
  std::unordered_map<uint64_t, Waiter> waiters_;
  std::map<std::string, std::deque<uint64_t>, std::less<>> waiting_;  // per queue, in arrival order
  std::map<std::string, int64_t, std::less<>> wake_at_;               // db ms when a queue's waiters should look
  std::set<std::string, std::less<>> to_serve_;                       // queues whose waiters should look now
  uint64_t next_waiter_ = 1;
  NextAt next_lease_;            // db ms: the earliest lease end this server knows of
  NextAt next_sweep_;            // db ms: when the oldest dead job's retention runs out
  int64_t clock_offset_ms_ = 0;  // database ms - steady ms
  UlidGenerator ids_;
  std::mt19937_64 rng_;  // back-off jitter only (tokens: the OS CSPRNG); under mu_
  std::shared_ptr<const ReceiptSigner> signer_;
  std::thread scheduler_, listener_, vacuumer_;
  int listening_socket_ = -1;  // while the listener listens: a duplicate of its socket (Close)
};

// The PostgreSQL store with its recurring schedules (schedule/scheduled_queue.h), on `clock`
// (nullptr: the system's): what a server opens.
class ScheduledPostgresQueue final : public ScheduledQueue<Queue> {
 public:
  static Result<std::unique_ptr<ScheduledPostgresQueue>> Open(const PostgresQueueOptions& options,
                                                              std::shared_ptr<Clock> clock = nullptr);
  using ScheduledQueue<Queue>::ScheduledQueue;
  ~ScheduledPostgresQueue() override;
  PostgresQueue& postgres() { return static_cast<PostgresQueue&>(store()); }
  void Close();
};

}  // namespace delayq::postgres
