// The Redis store (docs/architecture.md, The Redis store): the Queue interface on Redis or Redis Cluster, the embedded
// store's sibling. Every transition is one Lua script (scripts.h); this class validates input, picks shards, encodes
// records, caches queue configs, and runs the scheduler.
//
// How data flows. An operation reads its queue's cached view (Info: shards, config, how keys are
// routed; re-read from Redis after a second, since other servers may change it), validates with
// the rules every store shares (core/validate.h), runs one script per shard it touches, and
// tells the scheduler what it learned (a lease deadline, a death, jobs made ready).
//
// Each delayq process runs one scheduler thread. It knows, per queue and shard, the next due
// time, the next lease deadline and the oldest death (all from the scripts' answers, in Redis
// time) and sleeps until the earliest; then it promotes due jobs into the stream (promote),
// handles expired leases (reap) and deletes dead jobs past their retention (dead_expire). A
// subscriber thread listens on dq:{q}:wake: "due <ms>" makes the scheduler wake earlier, "ready"
// wakes the reserves waiting in this process. Any number of processes may do this at once: the
// scripts are atomic, so a second promote simply finds nothing left. A wake message can be lost
// (a reconnect), so every queue is also checked once per safety_interval_ms: a job can be late by
// at most that when its message is lost.
//
// Files, as the embedded store's: redis_queue.cc (lifecycle, running scripts), redis_config.cc
// (the queue cache and registry), redis_jobs.cc, redis_delivery.cc, redis_dead.cc,
// redis_queue_admin.cc, redis_scheduler.cc; redis_meta.h (the versioned job meta), doctor.h.
#pragma once

#include <algorithm>
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
#include <unordered_set>

#include "core/next_at.h"
#include "core/outcome_waiters.h"
#include "core/receipt_signer.h"
#include "core/ulid.h"
#include "delayq/queue.h"
#include "schedule/runner.h"
#include "schedule/schedule_store.h"
#include "schedule/scheduled_queue.h"
#include "store/redis/delivery_first.h"
#include "store/redis/redis_client.h"

namespace delayq::redis {

struct RedisQueueOptions {
  std::string url;                    // RedisUrl's forms (redis_client.h)
  std::string password;               // used when the URL gives none (a file, the environment)
  int shards = 1;                     // shards of a queue created by this process (1..256)
  int64_t safety_interval_ms = 1000;  // the longest a lost wake message can delay a job
  // A command (a script) without an answer within this counts as a lost connection: the call
  // answers kUnavailable and the connection is made again. Default 2000.
  int command_timeout_ms = 2000;
  QueueConfig default_queue_config;
  std::string consumer;  // consumer name in the stream groups; default host:pid
  // A write a client is told succeeded (enqueue, reserve, ack, nack, touch, cancel, reschedule,
  // replay, purge) first waits until this many replicas have it (Redis WAIT), at most
  // wait_timeout_ms; when fewer confirm, the call answers kUnavailable (the write is on the
  // primary only, and a failover to a replica could lose it). Default 0: no waiting (a failover
  // can lose the last writes; docs/reliability.md measures how many).
  int wait_replicas = 0;
  int wait_timeout_ms = 1000;
  // While this process runs a promote or reserve script, its enqueue scripts wait for it, each
  // at most this long (delivery_first.h): deliveries are not queued behind enqueues in Redis.
  // 0: enqueues never wait. Default 2 ms: a 1-producer burst on Redis (100 000 jobs due over
  // 10 s while they are enqueued) measured lateness p99 9.7-14.3 ms without, 5.5-6.1 ms with 2 ms
  // (4.1-5.4 ms with 5 ms), the enqueue meanwhile ~30 % slower (docs/performance.md).
  int64_t delivery_first_max_wait_us = 2000;
  ScheduleRunnerOptions schedules;  // recurring schedules (delayq/schedule.h)
  // Tests only: runs after a queue's config was read from Redis and before it is cached.
  std::function<void(const std::string& queue)> after_config_read_for_test;
  // Tests only: runs on the scheduler thread after a promote script answered, before its answer
  // is taken in (what happens meanwhile must not be overwritten by that older answer).
  std::function<void(const std::string& queue)> after_promote_for_test;
  // Queues at most (the registry's size, shared by every server): creating one more is
  // kResourceExhausted. Reads and reserves never create a queue. Default 10 000.
  size_t max_queues = 10'000;
};

class RedisQueue final : public Queue, private ScheduleStore {
 public:
  // Connects (kUnavailable when Redis cannot be reached, or holds data of a newer delayq) and
  // starts the threads.
  static Result<std::unique_ptr<RedisQueue>> Open(const RedisQueueOptions& options);
  ~RedisQueue() override;
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
  // The rows its recurring schedules are kept in (redis_schedules.cc; ScheduledRedisQueue runs them).
  ScheduleStore& schedule_rows() { return *this; }
  // What the last call to Redis found: ok, or why Redis cannot serve (unreachable, loading). The
  // scheduler calls Redis at least every safety_interval_ms, so this is at most that old.
  Status Health() override;

  RedisClient& client() { return *client_; }
  // Enqueue scripts this process held back for its deliveries so far (delivery_first.h).
  uint64_t enqueues_held_for_deliveries() const { return delivery_first_.held(); }
  int deliveries_in_flight() const { return delivery_first_.in_flight(); }

 private:
  // What an operation needs to know of a queue, copied out of the cache under mu_ (so nothing
  // it holds can change or go away while it talks to Redis).
  struct QueueView {
    std::string name;
    int shards = 1;
    QueueConfig config;
    // Keys of a sharded queue made before delayq routed them by CRC16 go where std::hash sent
    // them (redis_config.cc says why that must not change under such a queue).
    bool legacy_key_route = false;
    int ShardOfId(const Ulid& id) const { return id.bytes[15] % shards; }
    int ShardOfKey(std::string_view key) const;
  };
  // The cache entry of a queue: its view and what the scheduler knows of it. Per shard, when
  // something next happens (Redis ms): a job comes due, a lease runs out, the oldest dead job
  // died; a script's answer is merged with the notes since it was launched (core/next_at.h).
  struct QueueInfo {
    QueueView view;
    int64_t config_read_at = Clock::kNever;  // steady ms; re-read after a second (other processes)
    std::vector<NextAt> next_due;            // per shard
    std::vector<NextAt> next_lease;          // per shard
    std::vector<NextAt> next_dead;           // per shard: when its oldest dead job died
    std::vector<NextAt> next_done;           // per shard: when its oldest completed job was acked
    std::deque<uint64_t> waiters;
    bool check = true;  // run promote/reap at the next tick
    // Redis ms: flow control held this queue's ready jobs back until its next token; its waiting
    // reserves try again then. Clock::kNever: none.
    int64_t flow_wake = Clock::kNever;
    // Not a queue in Redis when last read (waiters wait on it): read again after this (steady
    // ms) or when its wake channel speaks, not at every tick.
    int64_t absent_until = 0;
    // Its config was read and the scheduler knows its shards: it can be promoted and reaped.
    bool Loaded() const {
      return config_read_at != Clock::kNever && next_due.size() >= static_cast<size_t>(view.shards);
    }
  };
  struct Waiter {
    std::string queue;
    ReserveRequest request;
    int64_t deadline = 0;  // steady ms
    ReserveCallback done;
  };

  explicit RedisQueue(RedisQueueOptions options, std::unique_ptr<RedisClient> client);
  // A shard's script arguments after its (id, token) pairs, for the receipts at those indexes.
  std::vector<Status> AckValid(std::string_view queue, std::span<const AckRequest> requests);
  using TailFn = std::function<std::vector<std::string>(const QueueView&, const std::vector<size_t>&)>;
  std::vector<Status> PerReceipt(std::string_view queue, std::span<const std::string> receipts, const Script& script,
                                 const TailFn& tail);

  // --- lifecycle and scripts (redis_queue.cc) ---
  void Start();
  // Refuses a Redis whose data format (dq:format) is newer than this delayq reads.
  Status CheckDataFormat();
  // Reads the receipt secret from Redis, making it first if it is missing (SET NX).
  Status LoadReceiptSecret();
  std::shared_ptr<const ReceiptSigner> Signer();
  // Runs a script on one shard of a queue. `confirm`: a write the caller is told succeeded, which
  // waits for options_.wait_replicas.
  Result<Value> Run(const Script& script, const std::string& queue, int shard, int shards,
                    const std::vector<std::string>& args, bool confirm = false);
  Result<Value> Run(const Script& script, const QueueView& q, int shard, const std::vector<std::string>& args,
                    bool confirm = false) {
    return Run(script, q.name, shard, q.shards, args, confirm);
  }
  // The script on several shards of a queue at once (RedisClient::EvalAll): `args` per shard,
  // answers in the same order.
  std::vector<Result<Value>> RunAll(const Script& script, const QueueView& q,
                                    const std::vector<std::pair<int, std::vector<std::string>>>& shard_args,
                                    bool confirm = false);
  // One command, or a script without the queue keys, on the node of `route_key`. Every call to
  // Redis goes through these or Run, so Health() sees what the last one found.
  Result<Value> Call(std::string_view route_key, const std::vector<std::string>& argv);
  Result<Value> Eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                     bool confirm = false);
  // A write that is answered to a caller (a config, a queue made or deleted, a schedule): with
  // --redis-wait-replicas, confirmed by that many replicas like a job's write (WAIT), so a
  // failover cannot lose what was acknowledged.
  Result<Value> Write(std::string_view route_key, const std::vector<std::string>& argv);
  // Drops what this server holds of a deleted queue (its waiters stay, as on any name).
  void ForgetDeletedQueue(const std::string& queue);
  // Records what a call to Redis found, for Health().
  void Observe(const Status& s);

  // --- the queue cache and registry (redis_config.cc) ---
  // The queue's view, loading shards and config from Redis when new or stale. kNotFound when no
  // queue has that name and `create` is false; with `create`, registers it (kResourceExhausted
  // past max_queues).
  Result<QueueView> Info(std::string_view queue, bool create);
  // One read of the config hash, cached unless a config write happened since `writes_before`
  // (then nullopt: Info reads again, and on its last try caches without the check).
  Result<std::optional<QueueView>> ReadConfig(const std::string& queue, bool create,
                                              std::optional<uint64_t> writes_before);
  Status WriteConfig(const std::string& queue, const QueueConfig& config);
  // Sets the paused flag on every shard of the queue.
  Status SetPaused(std::string_view queue, bool paused);

  // --- jobs (redis_jobs.cc) ---
  Result<Job> ToJob(const std::string& queue, const Value& v);
  Status Watch(std::string_view queue, std::string_view id, int64_t wait_ms);  // OutcomeWaiters::Hooks::watch

  // --- deliveries (redis_delivery.cc) ---
  Result<std::vector<Delivery>> ReserveNow(const std::string& queue, const ReserveRequest& request);
  Status DeliveryError(const std::string& code, const Ulid& id);

  // --- schedules (redis_schedules.cc): where the runner keeps them ---
  Result<std::optional<StoredSchedule>> LoadSchedule(std::string_view queue, std::string_view name) override;
  Result<std::vector<StoredSchedule>> LoadSchedules(std::string_view queue) override;
  Status StoreSchedule(const StoredSchedule& s, uint64_t expected) override;
  Status EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) override;

  // --- the scheduler and the wake channel (redis_scheduler.cc) ---
  // The scheduler thread: one tick at a time, each answering when the next is due; between ticks
  // it sleeps until then or until poked. The embedded store's scheduler has the same shape.
  void SchedulerLoop();
  struct SchedulerTurn;  // what one tick found to do (redis_scheduler.cc)
  struct SchedulerTimers {
    int64_t next_safety = 0;    // steady ms: the next safety probe
    int64_t next_registry = 0;  // steady ms: the next read of the queue registry
  };
  // One tick: collects what is due (under mu_), runs it (without), and answers the steady ms of
  // the next tick (now: something is already waiting). Called and returns with `lock` held.
  int64_t SchedulerTick(std::unique_lock<std::mutex>& lock, SchedulerTimers& timers);
  SchedulerTurn CollectTurnLocked(int64_t steady, SchedulerTimers& timers);
  void ExpireWaitersLocked(int64_t steady, SchedulerTurn& turn);
  void RunTurn(SchedulerTurn& turn);
  void RunPromotes(SchedulerTurn& turn);
  void RunReaps(SchedulerTurn& turn);
  void RunDeadExpiry(SchedulerTurn& turn);
  void ReadUnloaded(const std::vector<std::string>& names);
  void RefreshRegistry();
  int64_t NextTickLocked(const SchedulerTimers& timers);
  void SubscriberLoop();
  bool Subscribe(RedisClient::RawConnection& conn);
  void HandleWakeMessage(const Value& v);
  static bool IsSubscribed(const Value& v);  // Redis's answer to PSUBSCRIBE
  void CatchUp();
  void ServeWaiters(const std::string& queue);
  void Poke();
  // What an operation learned, for the scheduler: a lease deadline, a death (its retention
  // sweep), jobs made ready (waiting reserves try again). Take mu_ themselves.
  void NoteLease(const std::string& queue, int shard, int64_t deadline);
  void NoteDeath(const std::string& queue, int shard, int64_t dead_at);
  void NoteCompleted(const std::string& queue, int shard, int64_t completed_at);
  void NoteReady(const std::string& queue);
  // The reserve script held ready jobs back (flow control) until next_token_us (Redis µs; 0:
  // until a lease ends, which the wake channel announces).
  void NoteFlowLimited(const std::string& queue, int shard, int64_t next_token_us);
  // Drops the local entry of `queue` when it was never read from Redis and no waiter is left.
  void DropIfUnusedLocked(const std::string& queue);

  const RedisQueueOptions options_;
  std::unique_ptr<RedisClient> client_;
  // Waits for an outcome (core/outcome_waiters.h): watch.lua notes each job waited for, the wake
  // channel's "outcome <state> <id>" (from any server's scripts) wakes its waits here.
  OutcomeWaiters outcomes_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  bool poked_ = false;
  // Bumped by every WriteConfig: a config read that started before a write must not overwrite
  // the cache with what it read (Info re-reads instead).
  uint64_t config_writes_ = 0;
  std::map<std::string, QueueInfo, std::less<>> queues_;
  std::set<std::string> ready_notices_;  // queues whose waiters should try again
  std::unordered_map<uint64_t, Waiter> waiters_;
  // Waiters ServeWaiters has taken out while it tries a reserve for them, and those of them
  // cancelled meanwhile (answered empty there instead of waiting on). Found by the conformance
  // suite under sanitizers: a cancel in that window was lost and the reserve waited its full wait.
  std::unordered_set<uint64_t> serving_, cancelled_while_serving_;
  uint64_t next_waiter_ = 1;
  int64_t clock_offset_ms_ = 0;  // Redis time - local steady time
  Status health_;                // guarded by mu_; see Health()
  UlidGenerator ids_;
  std::mt19937_64 rng_;  // shard choice and back-off jitter only (receipts: the OS CSPRNG); under mu_
  // Signs receipts with the secret kept in Redis, which every server sharing it reads (and
  // reads again after Redis lost its data and another server made a new one). Under mu_.
  std::shared_ptr<const ReceiptSigner> signer_;
  // Promote and reserve scripts before this process's enqueue scripts (delivery_first.h).
  DeliveryFirst delivery_first_;
  std::thread scheduler_, subscriber_;
  // The subscriber's connection while it has one (under mu_): Close interrupts its read, so a
  // store closes at once instead of after the read's timeout (a quarter second per store closed
  // made each Redis conformance test last 0.26 s).
  RedisClient::RawConnection* subscription_ = nullptr;
};

// The Redis store with its recurring schedules (schedule/scheduled_queue.h), on `clock` (nullptr:
// the system's): what a server opens.
class ScheduledRedisQueue final : public ScheduledQueue<Queue> {
 public:
  static Result<std::unique_ptr<ScheduledRedisQueue>> Open(const RedisQueueOptions& options,
                                                           std::shared_ptr<Clock> clock = nullptr);
  using ScheduledQueue<Queue>::ScheduledQueue;
  ~ScheduledRedisQueue() override;
  RedisQueue& redis() { return static_cast<RedisQueue&>(store()); }
  // Stops the schedules, then the store (RedisQueue::Close). Idempotent.
  void Close();
};

}  // namespace delayq::redis
