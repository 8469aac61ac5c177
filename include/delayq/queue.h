// The Queue interface: the whole job lifecycle (enqueue, deliver, settle, inspect, dead letters).
//
// Implemented by the embedded engine (delayq::Engine), the Redis and PostgreSQL stores and the HTTP client
// (delayq::Client); the server, the CLI and the Worker are written against this interface
// only, and one conformance suite (tests/conformance) runs against every implementation.
//
// All methods are thread-safe. A queue is created on first use by Enqueue or SetConfig;
// a Reserve or a read-only call on a queue that was never used creates nothing (reads answer
// kNotFound, a reserve an empty list or, waiting, whatever is enqueued to it meanwhile).
//
// Common errors of every method: kInvalidArgument (a bad queue name or field; the message
// names it), kUnavailable (the store is closed or unreachable), kIoError (the store failed;
// nothing was applied).
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/schedule.h"
#include "delayq/status.h"

namespace delayq {

// Called once with the jobs of an asynchronous reserve (possibly none, when the wait ran out or
// the store is closing) or an error. Runs on a store thread: it must not block.
using ReserveCallback = std::function<void(Result<std::vector<Delivery>>)>;
using EnqueueOneCallback = std::function<void(Result<EnqueueResult>)>;
using EnqueueCallback = std::function<void(Result<std::vector<EnqueueResult>>)>;
using AckCallback = std::function<void(std::vector<Status>)>;
using NackCallback = std::function<void(Result<NackResult>)>;
using TouchCallback = std::function<void(Result<TouchResult>)>;
using CancelCallback = std::function<void(Status)>;
using JobCallback = std::function<void(Result<Job>)>;

class Queue {
 public:
  virtual ~Queue() = default;

  // Adds one job. A key naming a live job (scheduled, ready or reserved) returns that job with
  // duplicate=true; with replace=true its payload, headers, due time (and max_attempts, when
  // given) are replaced first and its attempts start again from 0 (kConflict while it is
  // reserved). Errors: kInvalidArgument (empty payload, negative delay,
  // delay past the queue's max_delay_ms, bad key or headers), kTooLarge (payload over
  // max_payload). When this returns ok the job is durable as the store's durability promises.
  virtual Result<EnqueueResult> Enqueue(std::string_view queue, const EnqueueRequest& request) = 0;

  // Adds up to Limits::kMaxBatch jobs, all or none: one invalid request fails the batch and
  // nothing is stored. Results are in request order. One exception: a queue the Redis store
  // splits over shards stores each shard's part whole or not at all, so a refusal only Redis can
  // see (replacing a reserved job) in one part leaves the others stored, and the error says how
  // many (docs/operations.md).
  virtual Result<std::vector<EnqueueResult>> EnqueueBatch(std::string_view queue,
                                                          std::span<const EnqueueRequest> requests) = 0;

  // Enqueue and EnqueueBatch without holding the calling thread while the jobs are made durable:
  // `done` is called exactly once, with what the blocking call would return, possibly before
  // this returns and possibly on a store thread (so it must not block). The defaults call the
  // blocking ones.
  virtual void EnqueueAsync(std::string_view queue, const EnqueueRequest& request, EnqueueOneCallback done) {
    done(Enqueue(queue, request));
  }
  virtual void EnqueueBatchAsync(std::string_view queue, std::span<const EnqueueRequest> requests,
                                 EnqueueCallback done) {
    done(EnqueueBatch(queue, requests));
  }

  // The job's current state. kNotFound when it does not exist (acked, cancelled, purged).
  virtual Result<Job> Get(std::string_view queue, const JobRef& ref) = 0;

  // Deletes a scheduled, ready or dead job. kConflict while it is reserved; kNotFound when gone.
  virtual Status Cancel(std::string_view queue, const JobRef& ref) = 0;

  // Gives a scheduled or ready job a new due time; returns the job as it now is.
  // kConflict when it is reserved or dead.
  virtual Result<Job> Reschedule(std::string_view queue, const JobRef& ref, const When& when) = 0;

  // Cancel and Reschedule answered through `done`, as EnqueueAsync is. The defaults call the
  // blocking ones.
  virtual void CancelAsync(std::string_view queue, const JobRef& ref, CancelCallback done) { done(Cancel(queue, ref)); }
  virtual void RescheduleAsync(std::string_view queue, const JobRef& ref, const When& when, JobCallback done) {
    done(Reschedule(queue, ref, when));
  }

  // Waits up to wait_ms (0..Limits::kMaxWaitMs) for the job to reach a final state (IsFinal:
  // completed, dead, or cancelled, which only a wait answers), then calls `done` once with the job
  // as it then is: at the transition, or at the end of the wait with its live state. A wait that
  // began before the ack gets the job completed with its result even with keep_completed_ms 0
  // (kept Limits::kOutcomeHoldMs for it); by key, the key names the job until its ack. kNotFound
  // for no such job (or one that ended before the wait began), kUnavailable when the store closes
  // (wait again), kResourceExhausted past Limits::kMaxOutcomeWaiters. Woken by the transition, on
  // any server of a shared store, never by polling. Returns a handle for CancelOutcomeWait (0 when
  // `done` already ran).
  virtual uint64_t WaitOutcomeAsync(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) = 0;
  // Ends a wait early: its callback gets kUnavailable (unless it already ran).
  virtual void CancelOutcomeWait(uint64_t handle) = 0;
  // WaitOutcomeAsync, holding the calling thread.
  Result<Job> WaitOutcome(std::string_view queue, const JobRef& ref, int64_t wait_ms) {
    std::promise<Result<Job>> outcome;
    auto answer = outcome.get_future();
    WaitOutcomeAsync(queue, ref, wait_ms, [&outcome](Result<Job> job) { outcome.set_value(std::move(job)); });
    return answer.get();
  }

  // Reserves up to request.max ready jobs for request.lease_ms, waiting up to request.wait_ms
  // for the first one. An empty vector means nothing became ready in time (or the queue is
  // paused, or no queue has that name: a reserve never creates a queue, and one that waits on
  // such a name is answered when a job is enqueued to it). Each job's attempt counts this
  // delivery; each Delivery carries a fresh receipt.
  virtual Result<std::vector<Delivery>> Reserve(std::string_view queue, const ReserveRequest& request) = 0;

  // The same as Reserve without holding the calling thread while it waits: `done` is called
  // exactly once, possibly before this returns. Returns a handle for CancelReserve.
  virtual uint64_t ReserveAsync(std::string_view queue, const ReserveRequest& request, ReserveCallback done) = 0;
  // Ends a waiting ReserveAsync early: its callback gets an empty vector (unless it already ran).
  virtual void CancelReserve(uint64_t handle) = 0;

  // Acknowledges a delivery: the job is deleted, or kept as completed with the request's result
  // while the queue's keep_completed_ms says (a completed job is never live: its key is released
  // as an acked job's is, and its receipts act on nothing). A receipt stays valid until its job is
  // acked, delivered again or gone, so an ack after the lease ran out still succeeds if no one else
  // received the job meanwhile. kLeaseExpired when the job was delivered again or went dead;
  // kNotFound when the job no longer exists (or was acked); kInvalidArgument for an unparseable
  // receipt, or a result that is not JSON or is over Limits::kMaxResult (before anything changes).
  // Each request independently (one store write); one Status per request, in order.
  virtual std::vector<Status> AckBatch(std::string_view queue, std::span<const AckRequest> requests) = 0;
  // AckBatch answered through `done`, as EnqueueBatchAsync is. The default calls AckBatch.
  virtual void AckBatchAsync(std::string_view queue, std::span<const AckRequest> requests, AckCallback done) {
    done(AckBatch(queue, requests));
  }
  // The same without results. (An implementation that overrides AckBatch brings these back into
  // its scope with `using Queue::AckBatch;`.)
  Status Ack(std::string_view queue, std::string_view receipt) {
    const AckRequest request{std::string(receipt), std::nullopt};
    return AckBatch(queue, std::span(&request, 1)).front();
  }
  Status Ack(std::string_view queue, const AckRequest& request) {
    return AckBatch(queue, std::span(&request, 1)).front();
  }
  std::vector<Status> AckBatch(std::string_view queue, std::span<const std::string> receipts) {
    return AckBatch(queue, AckRequests(receipts));
  }
  void AckBatchAsync(std::string_view queue, std::span<const std::string> receipts, AckCallback done) {
    AckBatchAsync(queue, AckRequests(receipts), std::move(done));
  }
  static std::vector<AckRequest> AckRequests(std::span<const std::string> receipts) {
    std::vector<AckRequest> out;
    out.reserve(receipts.size());
    for (const auto& r : receipts) out.push_back({r, std::nullopt});
    return out;
  }

  // Gives back deliveries that never reached their consumer (an answer that could not be
  // written, a consumer that hung up before it, a worker stopping before it began the work): each
  // job is ready again at once, in its place, and the delivery counts neither as an attempt nor
  // as a delivery. Each receipt independently; one Status per receipt, in order: kLeaseExpired
  // when its delivery is no longer current or its lease already ran out (that attempt counted),
  // kNotFound when the job is gone, kInvalidArgument for an unparseable receipt.
  virtual std::vector<Status> ReleaseBatch(std::string_view queue, std::span<const std::string> receipts) = 0;

  // Ends a delivery without success: the job is scheduled again after retry_in_ms (or the
  // queue's back-off), or goes dead when this was its last attempt or request.dead is set.
  // Receipt errors as for Ack.
  virtual Result<NackResult> Nack(std::string_view queue, const NackRequest& request) = 0;

  // Extends the lease of a current delivery to now + lease_ms (default: the queue's lease_ms),
  // and records its progress when the request carries one. Receipt errors as for Ack;
  // kInvalidArgument for a progress that is not JSON or is too large, before anything changes.
  virtual Result<TouchResult> Touch(std::string_view queue, const TouchRequest& request) = 0;
  Result<TouchResult> Touch(std::string_view queue, std::string_view receipt, std::optional<int64_t> lease_ms) {
    return Touch(queue, TouchRequest{std::string(receipt), lease_ms, std::nullopt});
  }

  // Nack and Touch answered through `done`, as EnqueueAsync is: many of them in flight share the
  // store's fsyncs, and none holds its caller's thread meanwhile. The defaults call the
  // blocking ones.
  virtual void NackAsync(std::string_view queue, const NackRequest& request, NackCallback done) {
    done(Nack(queue, request));
  }
  virtual void TouchAsync(std::string_view queue, const TouchRequest& request, TouchCallback done) {
    done(Touch(queue, request));
  }

  // One page of the queue's jobs in request.state, in the order job.h gives for ListRequest;
  // pass page.next_cursor back for the next page until it is empty. kNotFound when no queue has
  // that name; kInvalidArgument for a bad limit or a cursor this listing did not give out.
  virtual Result<JobPage> ListJobs(std::string_view queue, const ListRequest& request) = 0;
  // The first page of dead jobs, oldest death first, at most `limit` (1..1000).
  Result<std::vector<Job>> ListDead(std::string_view queue, int32_t limit) {
    auto page = ListJobs(queue, ListRequest{JobState::kDead, limit, {}});
    if (!page.ok()) return page.status();
    return std::move(page->jobs);
  }
  // Makes dead jobs ready again with attempt 0; no ids means all. Unknown ids, and ids given
  // twice, are skipped. A dead job released its key: a replayed job takes it back unless a
  // live job holds it by then, and otherwise comes back without a key (so no two live jobs
  // share one). Returns how many were replayed.
  virtual Result<int64_t> ReplayDead(std::string_view queue, std::span<const std::string> ids) = 0;
  // Deletes every dead job of the queue; returns how many.
  virtual Result<int64_t> PurgeDead(std::string_view queue) = 0;

  virtual Result<QueueStats> Stats(std::string_view queue) = 0;
  // Every known queue, by name.
  virtual Result<std::vector<QueueStats>> ListQueues() = 0;
  // Scheduled jobs of the queue counted by due time, `buckets` buckets of bucket_ms from now.
  virtual Result<ScheduleHistogram> Schedule(std::string_view queue, int64_t bucket_ms, int32_t buckets) = 0;

  virtual Result<QueueConfig> GetConfig(std::string_view queue) = 0;
  // Replaces the queue's configuration (validated as a whole). Applies to later operations;
  // jobs already stored keep their max_attempts.
  virtual Status SetConfig(std::string_view queue, const QueueConfig& config) = 0;

  // While paused, jobs still come due but none is handed out. Persisted across restarts.
  // Deletes a queue: its config, pause state and counters, and with `force` every job in it
  // (scheduled, ready, reserved and dead; their receipts then act on nothing). Returns the jobs
  // deleted. kConflict when it holds jobs and `force` is false (nothing changes); kNotFound when
  // no queue has that name. Reserves waiting on it keep waiting, as on a name that is not a queue.
  virtual Result<int64_t> DeleteQueue(std::string_view queue, bool force) = 0;
  virtual Status Pause(std::string_view queue) = 0;
  virtual Status Resume(std::string_view queue) = 0;

  // --- Recurring schedules (delayq/schedule.h) ---
  // Every store delayq opens has them. A store class on its own does not (kInternal): it gets
  // them from the ScheduledQueue its opener wraps it in (src/schedule/scheduled_queue.h).
  // Creates the schedule, or replaces the one of that name: its jobs not yet due are cancelled and
  // it starts again from now (nothing counts as missed). Creates the queue when it is new. Answers
  // the schedule with its next runs. kInvalidArgument names the field (name, cron, every,
  // timezone, start_at/end_at); kTooLarge: a payload over the queue's max_payload;
  // kResourceExhausted: ScheduleLimits::kMaxPerQueue schedules, or the store's queue limit.
  virtual Result<RecurringSchedule> PutSchedule(std::string_view /*queue*/, const ScheduleSpec& /*spec*/) {
    return NoSchedules();
  }
  // kNotFound when the queue has no schedule of that name.
  virtual Result<RecurringSchedule> GetSchedule(std::string_view /*queue*/, std::string_view /*name*/) {
    return NoSchedules();
  }
  // The queue's schedules by name (an empty list for a queue without any, or that does not exist).
  virtual Result<std::vector<RecurringSchedule>> ListSchedules(std::string_view /*queue*/) { return NoSchedules(); }
  // Deletes it and cancels its jobs not yet due (jobs already due are left to run). kNotFound.
  virtual Status DeleteSchedule(std::string_view /*queue*/, std::string_view /*name*/) { return NoSchedules(); }
  // Paused: no occurrence becomes a job, and the jobs not yet due are cancelled. Resumed: it runs
  // again from now (the runs the pause held back do not). kNotFound.
  virtual Result<RecurringSchedule> PauseSchedule(std::string_view /*queue*/, std::string_view /*name*/,
                                                  bool /*paused*/) {
    return NoSchedules();
  }

  // Whether the store can serve requests now: ok, or kUnavailable naming why (closed, Redis
  // unreachable or loading its data). Answers from what the store saw last (at most about a
  // second ago); it never waits on the store, so a health check cannot hang.
  virtual Status Health() = 0;

 private:
  static Status NoSchedules() {
    return Status::Internal(
        "this store was opened without recurring schedules (a bug: stores get them from ScheduledQueue)");
  }
};

}  // namespace delayq
