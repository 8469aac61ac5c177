// Enqueue on the wire (POST /v1/queues/{q}/jobs): one job, or {"jobs": [...]} as a batch, and
// the answer {"id", "due_at", "duplicate"[, "replaced"]} (a batch: {"jobs": [...]}).
// A job: "payload" (any JSON value, kept verbatim) or "payload_base64", a due time (when.h),
// "key", "replace", "debounce", "headers" (strings), "max_attempts", "key_ttl_ms".
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq::wire {

struct EnqueueBody {
  std::vector<EnqueueRequest> jobs;
  bool batch = false;  // {"jobs": [...]}
};

// A payload that is not valid JSON text (or is marked binary) is sent as payload_base64.
std::string WriteEnqueueRequest(const EnqueueRequest& request);
std::string WriteEnqueueBatchRequest(std::span<const EnqueueRequest> requests);
// kInvalidArgument naming the field ("jobs[3].delay_ms"); kTooLarge past Limits::kMaxBatch.
Result<EnqueueBody> ParseEnqueueRequest(std::string_view body);

std::string WriteEnqueueResponse(const EnqueueResult& result);
std::string WriteEnqueueBatchResponse(std::span<const EnqueueResult> results);
Result<std::vector<EnqueueResult>> ParseEnqueueResponse(std::string_view body);  // one or a batch

}  // namespace delayq::wire
