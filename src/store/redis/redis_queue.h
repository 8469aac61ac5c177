// The Redis store (SPEC 5.2): the Queue interface on Redis or Redis Cluster. Every transition is
// one Lua script (scripts.h); this class validates input, picks shards, encodes records, and runs
// the scheduler:
//
// Each delayq process runs one scheduler thread. It knows, per queue, the next due time and the
// next lease deadline (both from the scripts' answers, in Redis time) and sleeps until the
// earliest; then it promotes due jobs into the stream (promote) and handles expired leases
// (reap). A subscriber thread listens on dq:{q}:wake: "due <ms>" makes the scheduler wake
// earlier, "ready" wakes the reserves waiting in this process. Any number of processes may do
// this at once: the scripts are atomic, so a second promote simply finds nothing left.
// A wake message can be lost (a reconnect), so every queue is also checked once per
// safety_interval_ms: a job can be late by at most that when its message is lost.
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
#include <unordered_set>

#include "core/receipt_signer.h"
#include "core/ulid.h"
#include "delayq/queue.h"
#include "store/redis/redis_client.h"

namespace delayq::redis {

struct RedisQueueOptions {
  std::string url;                    // redis://HOST:PORT or redis-cluster://HOST:PORT,...
  int shards = 1;                     // shards of a queue created by this process (1..256)
  int64_t safety_interval_ms = 1000;  // the longest a lost wake message can delay a job
  QueueConfig default_queue_config;
  std::string consumer;               // consumer name in the stream groups; default host:pid
  // A write a client is told succeeded (enqueue, reserve, ack, nack, touch, cancel, reschedule,
  // replay, purge) first waits until this many replicas have it (Redis WAIT), at most
  // wait_timeout_ms; when
  // fewer confirm, the call answers kUnavailable (the write is on the primary only, and a
  // failover to a replica could lose it). Default 0: no waiting (a failover can lose the last
  // writes; docs/reliability.md measures how many).
  int wait_replicas = 0;
  int wait_timeout_ms = 1000;
  // Tests only: runs after a queue's config was read from Redis and before it is cached.
  std::function<void(const std::string& queue)> after_config_read_for_test;
  // Queues at most (the registry's size, shared by every server): creating one more is
  // kResourceExhausted. Reads and reserves never create a queue. Default 10 000.
  size_t max_queues = 10'000;
};

class RedisQueue final : public Queue {
 public:
  // Connects (kUnavailable when Redis cannot be reached) and starts the threads.
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
  uint64_t ReserveAsync(std::string_view queue, const ReserveRequest& request,
                        ReserveCallback done) override;
  void CancelReserve(uint64_t handle) override;
  Status Ack(std::string_view queue, std::string_view receipt) override;
  std::vector<Status> AckBatch(std::string_view queue, std::span<const std::string> receipts) override;
  Result<NackResult> Nack(std::string_view queue, const NackRequest& request) override;
  Result<TouchResult> Touch(std::string_view queue, std::string_view receipt,
                            std::optional<int64_t> lease_ms) override;
  Result<std::vector<Job>> ListDead(std::string_view queue, int32_t limit) override;
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
  // What the last call to Redis found: ok, or why Redis cannot serve (unreachable, loading). The
  // scheduler calls Redis at least every safety_interval_ms, so this is at most that old.
  Status Health() override;

  RedisClient& client() { return *client_; }

 private:
  // Sets the paused flag on every shard of the queue.
  Status SetPaused(std::string_view queue, bool paused);
  struct QueueInfo {
    std::string name;
    int shards = 1;
    QueueConfig config;
    int64_t config_read_at = -1;  // steady ms; re-read after a second (other processes)
    std::vector<int64_t> next_due;    // per shard, Redis ms; -1 none
    std::vector<int64_t> next_lease;  // per shard
    std::vector<int64_t> next_dead;   // per shard: when its oldest dead job died; -1 none
    std::deque<uint64_t> waiters;
    bool check = true;  // run promote/reap at the next tick
    // Not a queue in Redis when last read (waiters wait on it): read again after this (steady
    // ms) or when its wake channel speaks, not at every tick.
    int64_t absent_until = 0;
  };
  struct Waiter {
    std::string queue;
    ReserveRequest request;
    int64_t deadline = 0;  // steady ms
    ReserveCallback done;
  };

  explicit RedisQueue(RedisQueueOptions options, std::unique_ptr<RedisClient> client);
  void Start();
  std::vector<std::string> Keys(const std::string& queue, int shard) const;
  // The queue's info, loading shards and config from Redis when new or stale.
  Result<QueueInfo*> Info(std::string_view queue, bool create);
  // One read of the config hash, cached unless a config write happened since `writes_before`
  // (then nullptr: Info reads again, and on its last try caches without the check).
  Result<QueueInfo*> ReadConfig(const std::string& queue, const std::string& home, bool create,
                                std::optional<uint64_t> writes_before);
  // Runs a script on the queue's shard. `confirm`: a write the caller is told succeeded, which
  // waits for options_.wait_replicas.
  Result<Value> Run(const Script& script, const std::string& queue, int shard,
                    const std::vector<std::string>& args, bool confirm = false);
  // Records what a call to Redis found, for Health().
  void Observe(const Status& s);
  int ShardOf(const QueueInfo& q, const Ulid& id) const { return id.bytes[15] % q.shards; }
  Result<std::vector<Delivery>> ReserveNow(const std::string& queue, const ReserveRequest& request);
  Status DeliveryError(const std::string& code, const Ulid& id);
  Result<Job> ToJob(const std::string& queue, const Value& v);
  Status WriteConfig(const std::string& queue, const QueueConfig& config, int shards);

  void SchedulerLoop();
  void SubscriberLoop();
  void ServeWaiters(const std::string& queue);
  void Poke();
  // Drops the local entry of `queue` when it was never read from Redis and no waiter is left.
  void DropIfUnusedLocked(const std::string& queue);
  // Reads the receipt secret from Redis, making it first if it is missing (SET NX).
  Status LoadReceiptSecret();
  std::shared_ptr<const ReceiptSigner> Signer();

  const RedisQueueOptions options_;
  std::unique_ptr<RedisClient> client_;

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
  std::thread scheduler_, subscriber_;
};

// `delayq doctor`: every Redis setting that can lose or delay jobs, with the fix for each.
struct DoctorFinding {
  std::string node;
  std::string problem;
  std::string fix;
};
Result<std::vector<DoctorFinding>> Doctor(std::string_view url);

}  // namespace delayq::redis
