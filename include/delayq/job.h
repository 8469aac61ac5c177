// The job model shared by every store, the HTTP API and the CLI.
//
// Times are milliseconds since the Unix epoch on the store's clock ("due_at_ms"), or
// durations in milliseconds ("delay_ms"). A producer's clock never decides a due time:
// the store turns a delay into due_at with its own clock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayq {

using Headers = std::map<std::string, std::string>;

// kCompleted: acked, and kept for QueueConfig::keep_completed_ms with its result (never live).
// kCancelled is never stored: only a wait for an outcome answers it (Queue::WaitOutcomeAsync), with
// the job as it was when a cancel deleted it.
enum class JobState { kScheduled, kReady, kReserved, kDead, kCompleted, kCancelled };
// "scheduled" | "ready" | "reserved" | "dead" | "completed" | "cancelled".
const char* JobStateName(JobState state);
// The state of that name, or nothing.
std::optional<JobState> ParseJobState(std::string_view name);
// Completed, dead or cancelled: what a wait for an outcome answers.
inline bool IsFinal(JobState state) {
  return state == JobState::kCompleted || state == JobState::kDead || state == JobState::kCancelled;
}

// Limits that hold for every queue (per-queue limits live in QueueConfig).
struct Limits {
  static constexpr size_t kMaxQueueName = 128;      // [A-Za-z0-9._:-]{1,128}
  static constexpr size_t kMaxKey = 512;            // idempotency key bytes
  static constexpr size_t kMaxHeaders = 64;         // header entries per job
  static constexpr size_t kMaxHeaderBytes = 16384;  // sum of header names and values
  static constexpr size_t kMaxErrorText = 4096;     // last_error is truncated to this
  static constexpr size_t kMaxProgress = 4096;      // TouchRequest::progress bytes
  static constexpr size_t kMaxResult = 65536;       // AckRequest::result bytes
  static constexpr size_t kMaxBatch = 1000;         // jobs per enqueue batch
  static constexpr int32_t kMaxReserve = 1000;      // jobs per reserve call
  static constexpr int64_t kMaxWaitMs = 60'000;     // longest reserve long-poll
  static constexpr int64_t kMinLeaseMs = 1'000;
  static constexpr int64_t kMaxLeaseMs = 43'200'000;  // 12 h
  static constexpr int32_t kMaxAttempts = 1'000;
  static constexpr int64_t kMaxPayloadCeiling = 64 << 20;    // max_payload may not exceed 64 MiB
  static constexpr int64_t kDefaultReserveBytes = 16 << 20;  // ReserveRequest::max_bytes
  static constexpr int64_t kMaxReserveBytes = 256 << 20;
  static constexpr int64_t kMaxKeyTtlMs = 30LL * 86'400'000;         // EnqueueRequest::key_ttl_ms: 30 days
  static constexpr int64_t kMaxKeepCompletedMs = 30LL * 86'400'000;  // QueueConfig::keep_completed_ms
  // A job acked while someone waits for its outcome is kept completed at least this long, with
  // keep_completed_ms 0 too, so the waiters (on any server) read its result.
  static constexpr int64_t kOutcomeHoldMs = 60'000;
  static constexpr size_t kMaxOutcomeWaiters = 100'000;  // waits for an outcome one store holds
  static constexpr int32_t kMaxListPage = 1000;          // jobs per ListJobs page (default 100)
  static constexpr int32_t kMaxPriority = 9;             // EnqueueRequest::priority: 0..9
  static constexpr size_t kMaxGroup = 128;               // EnqueueRequest::group bytes
  static constexpr size_t kStatsGroups = 10;             // QueueStats::groups: the top 10
  static constexpr int64_t kMaxListBytes = 16 << 20;     // stored bytes per ListJobs page
  // A date given as epoch milliseconds (a schedule's start_at and end_at) lies in
  // 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z, the dates an RFC 3339 string can name.
  static constexpr int64_t kMaxDateMs = 253'402'300'799'999;
};

// Exponential back-off for a nack without an explicit retry delay:
// delay(attempt) = min(max_ms, base_ms * factor^(attempt-1)), then multiplied by a uniform
// random factor in [1 - jitter, 1 + jitter] and clamped to max_ms again.
struct BackoffPolicy {
  int64_t base_ms = 1'000;     // default 1 s
  double factor = 2.0;         // default 2.0 (1 <= factor <= 100)
  int64_t max_ms = 3'600'000;  // default 1 h
  double jitter = 0.1;         // default 0.1 (0 <= jitter <= 1)
  bool operator==(const BackoffPolicy&) const = default;
};

struct QueueConfig {
  int32_t max_attempts = 5;                      // deliveries before a job goes dead; default 5
  BackoffPolicy backoff;                         // see BackoffPolicy
  int64_t lease_ms = 30'000;                     // default lease of a reservation; 30 s
  int64_t max_payload = 1 << 20;                 // payload bytes; default 1 MiB
  int64_t dead_retention_ms = 7LL * 86'400'000;  // dead jobs are purged after this; 7 days
  int64_t max_delay_ms = 365LL * 86'400'000;     // longest delay accepted; 365 days
  // Flow control (core/flow_control.h). Deliveries per second, a token bucket: 0..1 000 000,
  // fractions allowed; default 0 (unlimited).
  double rate_per_s = 0;
  // The bucket's size (the most a reserve hands out at once after a pause): 0..1 000 000; default
  // 0, which means rate_per_s rounded up (at least 1).
  int64_t burst = 0;
  // Jobs leased at once, 0..1 000 000; default 0 (unlimited).
  int64_t max_reserved = 0;
  // Jobs of one group (EnqueueRequest::group) leased at once, 0..1 000 000; default 0 (unlimited).
  int64_t group_max_reserved = 0;
  // A ready job counts one priority level higher for every this long it has been due (at most 9),
  // so a low priority is not starved: 0 (strict priorities) to 100 years; default 60 s.
  int64_t priority_aging_ms = 60'000;
  // How long an acked job is kept as `completed` (with its AckRequest::result), from its ack:
  // 0..Limits::kMaxKeepCompletedMs; default 0 (an acked job is deleted at once). Read when the
  // sweep runs, as dead_retention_ms is: a shorter time deletes the older completed jobs then.
  int64_t keep_completed_ms = 0;
  bool operator==(const QueueConfig&) const = default;
};

// How long after its ack the sweep keeps a completed job: keep_completed_ms, or, when that is 0,
// Limits::kOutcomeHoldMs (only jobs acked while someone waited for them are kept then). Every
// store's sweep follows this one rule.
inline int64_t CompletedSweepAfterMs(const QueueConfig& config) {
  return config.keep_completed_ms > 0 ? config.keep_completed_ms : Limits::kOutcomeHoldMs;
}

// A job as returned by Get and by the dead-letter listing.
struct Job {
  std::string id;  // ULID, 26 characters, sortable by creation time
  std::string queue;
  JobState state = JobState::kScheduled;
  int64_t due_at_ms = 0;
  int32_t attempt = 0;  // deliveries so far
  int32_t max_attempts = 0;
  std::string key;      // idempotency key, empty when none
  std::string payload;  // opaque bytes
  bool binary = false;  // see EnqueueRequest::binary
  Headers headers;
  int64_t created_at_ms = 0;
  std::string last_error;
  int64_t lease_deadline_ms = 0;  // when state is kReserved
  int64_t dead_at_ms = 0;         // when state is kDead
  int64_t completed_at_ms = 0;    // when state is kCompleted: when it was acked
  int32_t priority = 0;           // EnqueueRequest::priority
  std::string group;              // EnqueueRequest::group
  // While reserved: the JSON text its current delivery's last touch reported (TouchRequest);
  // empty when none did, and in every other state.
  std::string progress;
  // When completed: the JSON text its ack carried (AckRequest::result); empty when none.
  std::string result;
};

// When a job becomes due. Give at most one of delay_ms and deliver_at_ms; neither means now.
// A deliver_at_ms in the past means "due now".
struct When {
  std::optional<int64_t> delay_ms;
  std::optional<int64_t> deliver_at_ms;
};

struct EnqueueRequest {
  std::string payload;  // 1..max_payload bytes
  // The payload is opaque bytes, not JSON text: the HTTP API returns it as payload_base64
  // (a JSON payload is returned verbatim as "payload").
  bool binary = false;
  Headers headers;
  When when;
  std::string key;       // optional idempotency key
  bool replace = false;  // with a key naming a live job: replace its payload, headers, due time
  // With a key naming a live job: replace it as `replace` does, but never move its due time
  // earlier: it becomes the later of its due time and this request's (a trailing-edge debounce:
  // each new event pushes the job back; without debounce the first event's job is kept as is,
  // and with replace alone the last event's due time wins, earlier or later). Implies replace;
  // kConflict while the job is reserved.
  bool debounce = false;
  std::optional<int32_t> max_attempts;  // default: the queue's max_attempts
  // 0..Limits::kMaxKeyTtlMs, with a key only. The key stays taken for this long after the job is
  // acked or cancelled (not after it goes dead): an enqueue with the key meanwhile is a
  // duplicate of the finished job (its id and due time; with replace too). 0: the key is free
  // once the job leaves, as without this. Like SQS FIFO's deduplication window.
  int64_t key_ttl_ms = 0;
  // Among the ready jobs of its group a reserve takes the higher priority first (0..9, default 0),
  // then the earlier due time; a job gains a level for every QueueConfig::priority_aging_ms it has
  // been due.
  int32_t priority = 0;
  // Fairness between tenants: a reserve takes ready jobs from the groups in turn, so a group with
  // many ready jobs does not starve one with few; QueueConfig::group_max_reserved caps each.
  // 0..Limits::kMaxGroup bytes; empty: the default group. The order, on every store:
  // core/ready_order.h.
  std::string group;
};

struct EnqueueResult {
  std::string id;
  int64_t due_at_ms = 0;
  bool duplicate = false;  // the key named a live job; that job's id is returned
  bool replaced = false;   // ... and it was replaced (EnqueueRequest::replace)
};

// Addresses a job by id or by idempotency key (exactly one is set).
struct JobRef {
  std::string id;
  std::string key;
  static JobRef ById(std::string id) { return {std::move(id), {}}; }
  static JobRef ByKey(std::string key) { return {{}, std::move(key)}; }
};

struct ReserveRequest {
  int32_t max = 1;                  // 1..1000 jobs
  int64_t wait_ms = 0;              // 0..60000: how long to wait for a first ready job
  std::optional<int64_t> lease_ms;  // 1000..43200000; default: the queue's lease_ms (as read
                                    // while the reserve runs or waits)
  // 1..256 MiB: the answer stops before the job that would take the stored size of its jobs
  // (payload, headers, key and bookkeeping, as the store keeps them) over this; the first job
  // always comes, whatever its size.
  int64_t max_bytes = Limits::kDefaultReserveBytes;
};

// One delivery of a job to a consumer. The receipt names this delivery only.
struct Delivery {
  std::string id;
  std::string receipt;
  std::string payload;
  bool binary = false;
  Headers headers;
  int32_t attempt = 0;  // 1 for the first delivery
  int32_t max_attempts = 0;
  int64_t due_at_ms = 0;
  std::string key;
  int64_t lease_deadline_ms = 0;
  int32_t priority = 0;  // the job's EnqueueRequest::priority
  std::string group;     // the job's EnqueueRequest::group
};

// A job's W3C Trace Context: its producer's traceparent and tracestate, kept in its headers under
// those names (docs/http-api.md, "Trace context"), so every Job and Delivery carries them. Empty
// when the job has none. To give a job one, set the two headers on its EnqueueRequest.
inline std::string_view TraceParentOf(const Headers& headers) {
  auto it = headers.find("traceparent");
  return it == headers.end() ? std::string_view() : std::string_view(it->second);
}
inline std::string_view TraceStateOf(const Headers& headers) {
  auto it = headers.find("tracestate");
  return it == headers.end() ? std::string_view() : std::string_view(it->second);
}

// One delivery to acknowledge (Queue::AckBatch).
struct AckRequest {
  std::string receipt;
  // JSON text (at most Limits::kMaxResult bytes): the job's outcome, kept with it while the queue
  // keeps completed jobs (QueueConfig::keep_completed_ms; dropped with the job otherwise).
  std::optional<std::string> result;
};

struct NackRequest {
  std::string receipt;
  std::optional<int64_t> retry_in_ms;  // default: the queue's back-off for this attempt
  std::string error;                   // stored as last_error
  bool dead = false;                   // send to the dead-letter queue now
};

struct NackResult {
  JobState state = JobState::kScheduled;  // kScheduled (retry) or kDead
  int64_t due_at_ms = 0;                  // the retry's due time when scheduled
};

struct TouchRequest {
  std::string receipt;
  std::optional<int64_t> lease_ms;  // 1000..43200000; default: the queue's lease_ms
  // JSON text (at most Limits::kMaxProgress bytes): how far the consumer has got, shown on the
  // job while this delivery holds it (Job::progress). Nothing keeps the last one reported.
  std::optional<std::string> progress;
};

struct TouchResult {
  int64_t lease_deadline_ms = 0;
};

// Delivery lateness (delivered_at - due_at) of first deliveries after a job came due.
struct LatenessSummary {
  uint64_t count = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0, sum_ms = 0;
  // Cumulative counts for the Prometheus buckets in kLatenessBucketsMs (then +Inf = count).
  static constexpr double kLatenessBucketsMs[] = {1,   2,    5,    10,   25,    50,    100,  250,
                                                  500, 1000, 2500, 5000, 10000, 30000, 60000};
  std::vector<uint64_t> cumulative;
};

struct QueueCounters {
  uint64_t enqueued = 0, delivered = 0, acked = 0, nacked = 0, redelivered = 0, dead = 0;
};

struct QueueStats {
  std::string name;
  int64_t scheduled = 0, ready = 0, reserved = 0, dead = 0;
  int64_t completed = 0;  // kept completed jobs (QueueConfig::keep_completed_ms)
  int64_t due_next_60s = 0;
  std::optional<int64_t> earliest_due_at_ms;  // of scheduled jobs
  int64_t oldest_ready_ms = 0;                // age of the longest-waiting ready job
  bool paused = false;
  QueueCounters counters;  // since the store was opened
  LatenessSummary lateness;
  // Of first deliveries held back by flow control (rate_per_s, max_reserved): how long a limit
  // held them after they were due. That time is not in `lateness`.
  LatenessSummary limit_wait;
  // The groups with the most ready jobs (at most Limits::kStatsGroups), most first; empty when
  // no job of the queue has a group.
  struct Group {
    std::string group;
    int64_t ready = 0, reserved = 0;
  };
  std::vector<Group> groups;
};

// Scheduled jobs counted by due time: buckets[i] holds jobs due in
// [start_ms + i*bucket_ms, start_ms + (i+1)*bucket_ms).
struct ScheduleHistogram {
  int64_t start_ms = 0;
  int64_t bucket_ms = 0;
  std::vector<int64_t> buckets;
  int64_t later = 0;  // due after the last bucket
};

// One page of a queue's jobs in one state (Queue::ListJobs).
//
// Order: scheduled by (due_at, id); dead by (dead_at, id); completed by (completed_at, id); ready and reserved by
// (due_at, id) on the embedded store, and on the Redis store first those without a priority or a group in the order
// they became ready (the same, except that a replayed job goes last), then those with either by (due_at, id). Without
// priorities and groups that is the order a reserve hands jobs out; with them a reserve follows core/ready_order.h.
struct ListRequest {
  JobState state = JobState::kScheduled;
  int32_t limit = 100;  // 1..Limits::kMaxListPage
  // Empty: from the start. Else the next_cursor of the page before, for the same queue and state
  // (kInvalidArgument for anything else). A cursor is a position, not a snapshot: jobs that move
  // meanwhile may be missed or seen twice, the others are listed once each.
  std::string cursor;
};

struct JobPage {
  // At most `limit` jobs; fewer (even none) when the page reached Limits::kMaxListBytes of stored
  // job bytes or the store's scan budget for one page. The first job always comes.
  std::vector<Job> jobs;
  std::string next_cursor;  // empty: the listing is complete
};

}  // namespace delayq
