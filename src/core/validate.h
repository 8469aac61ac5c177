// Input rules shared by every store, so a request is judged the same in-process, over HTTP and
// on Redis. Each error names the field (with `field_prefix`, e.g. "jobs[3].") and the rule.
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
Status ValidateKey(std::string_view key, std::string_view field = "key");
Status ValidateDeadListLimit(int32_t limit);

// Checks payload, headers, key and max_attempts of one enqueue request against the queue's
// config (kTooLarge for a payload over max_payload).
Status ValidateEnqueue(const EnqueueRequest& request, const QueueConfig& config,
                       std::string_view field_prefix = "");

// The due time for `when` at `now_ms`: a delay must be >= 0 and <= max_delay_ms; a
// deliver_at in the past means now; one later than now + max_delay_ms is refused.
Result<int64_t> ResolveDue(const When& when, int64_t now_ms, const QueueConfig& config,
                           std::string_view field_prefix = "");

}  // namespace delayq
