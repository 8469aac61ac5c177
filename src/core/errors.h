// The error texts that more than one store (or layer) writes, one source each: the same failure
// reads the same whichever store answers, and the conformance suite checks that it does
// (ErrorMessagesAreTheSameOnEveryStore). Rules that only validate input are in validate.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "delayq/status.h"

namespace delayq::errors {

// kUnavailable: the store was closed (delayq is shutting down).
Status StoreClosed();
// The warning both stores log when a job goes dead (its attempts ran out, or a nack said so);
// `attempt` 0 when the store does not know it.
std::string DeadJobWarning(std::string_view queue, std::string_view id, int32_t attempt, std::string_view last_error);
// kNotFound: no queue has this name (reads never create one).
Status UnknownQueue(std::string_view queue);
// kResourceExhausted: creating `queue` would make queue number `would_be`, over `limit`.
Status QueueLimit(std::string_view queue, size_t would_be, size_t limit);
// kConflict: DELETE without force on a queue that holds `jobs` jobs (live or dead).
Status QueueNotEmpty(std::string_view queue, int64_t jobs);

// kInvalidArgument: `field` ("id", "ids[3]") holds `text`, which is not a job id.
Status NotAJobId(std::string_view field, std::string_view text);
// kNotFound: job `id` is not in `queue` (never was, or it was acked, cancelled or purged).
Status NoSuchJob(std::string_view queue, std::string_view id);
// kNotFound: no live job of `queue` has idempotency key `key`.
Status NoJobWithKey(std::string_view queue, std::string_view key);

// kConflict: job `id` is reserved, so it cannot be cancelled / rescheduled now.
Status ReservedCannotCancel(std::string_view id);
Status ReservedCannotReschedule(std::string_view id);
// kConflict: job `id` is dead; only a replay makes it live again.
Status DeadCannotReschedule(std::string_view id);
// kConflict: a reschedule names a completed job (kept by keep_completed_ms).
Status CompletedCannotReschedule(std::string_view id);
// kConflict: an enqueue with replace names (by `key`) job `id`, which is reserved.
Status ReservedCannotReplace(std::string_view field_prefix, std::string_view key, std::string_view id);

// Receipts whose delivery is over. kNotFound: the job is gone (acked, cancelled or purged).
Status DeliveryJobGone(std::string_view id);
// kLeaseExpired: the job went dead after `attempt` of `max_attempts`.
Status DeliveryWentDead(std::string_view id, int32_t attempt, int32_t max_attempts);
// kLeaseExpired: the job was delivered again (now attempt `attempt`) after the lease ran out.
Status DeliveredAgain(std::string_view id, int32_t attempt);
// kLeaseExpired: the job was nacked, rescheduled or replaced since (or delivered again).
Status DeliveryOver(std::string_view id);
// A release (Queue::ReleaseBatch) of a delivery whose lease already ran out.
Status ReleasedTooLate(std::string_view id);

}  // namespace delayq::errors
