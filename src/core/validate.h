// Input rules shared by every store, so a request is judged the same in-process, over HTTP and
// on Redis. Each error names the field (with `field_prefix`, e.g. "jobs[3].") and the rule.
// (Texts for outcomes rather than input, such as a reserved job, are in errors.h.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {

Status ValidateQueueName(std::string_view name);
Status ValidateConfig(const QueueConfig& config);
Status ValidateReserve(const ReserveRequest& request);
Status ValidateLeaseMs(int64_t lease_ms, std::string_view field = "lease_ms");
// The ranges of the 32-bit fields, judged on the 64-bit number a request carried (the wire calls
// these before it narrows): a reserve's max (1..Limits::kMaxReserve) and max_attempts
// (1..Limits::kMaxAttempts; `field` names it, "jobs[3].max_attempts").
Status ValidateReserveMax(int64_t max);
// A reserve's or a wait for an outcome's wait_ms: 0..Limits::kMaxWaitMs.
Status ValidateWaitMs(int64_t wait_ms);
Status ValidateMaxAttempts(int64_t max_attempts, std::string_view field = "max_attempts");
Status ValidateKey(std::string_view key, std::string_view field = "key");
// A job named by a well-formed id, or else by a key (not empty): what every store's Get checks
// once it knows the queue (an unknown queue is the first error).
Status ValidateJobRef(const JobRef& ref);
// A date in epoch milliseconds: 0 .. Limits::kMaxDateMs (1970 .. 9999).
Status ValidateDate(int64_t ms, std::string_view field);
Status ValidateDeadListLimit(int32_t limit);
// An enqueue batch holds 1 to Limits::kMaxBatch jobs (kTooLarge above).
Status ValidateBatchSize(size_t jobs);
// A schedule histogram of `buckets` (1..10000) buckets of whole minutes.
Status ValidateScheduleHistogram(int64_t bucket_ms, int32_t buckets);

// A nack's retry_in_ms is within 0..the queue's max_delay_ms.
Status ValidateNack(const NackRequest& request, const QueueConfig& config);
// A touch's lease_ms and progress (at most Limits::kMaxProgress bytes of JSON).
Status ValidateTouch(const TouchRequest& request);
// An ack's result (AckRequest::result): JSON nested at most kMaxResultDepth levels, at most
// Limits::kMaxResult bytes; `field` names it.
inline constexpr size_t kMaxResultDepth = 61;
Status ValidateResult(std::string_view result, std::string_view field = "result");
// The last_error a nack stores: its error text cut to Limits::kMaxErrorText, or a default.
std::string NackErrorText(const NackRequest& request);

// Checks payload, headers, key and max_attempts of one enqueue request against the queue's
// config (kTooLarge for a payload over max_payload).
Status ValidateEnqueue(const EnqueueRequest& request, const QueueConfig& config, std::string_view field_prefix = "");

// What can be judged of `when` without a clock: at most one of delay and deliver_at, and a
// delay within 0..max_delay_ms. (A store whose clock is elsewhere, Redis, checks this first.)
Status ValidateWhen(const When& when, const QueueConfig& config, std::string_view field_prefix = "");

// The due time for `when` at `now_ms`: ValidateWhen, and a deliver_at in the past means now; one
// later than now + max_delay_ms is refused.
Result<int64_t> ResolveDue(const When& when, int64_t now_ms, const QueueConfig& config,
                           std::string_view field_prefix = "");

}  // namespace delayq
