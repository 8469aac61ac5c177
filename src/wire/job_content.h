// The fields an enqueued job shares with a schedule's jobs (schedule.h), parsed once for both.
#pragma once

#include <string_view>

#include "delayq/job.h"
#include "delayq/status.h"
#include "wire/json_read.h"

namespace delayq::wire {

// "payload" (any JSON value, kept verbatim) | "payload_base64" | "headers" (strings) |
// "max_attempts" into `r`: true when `key` is one of them, false when not; kInvalidArgument
// naming `prefix` + the field. *have_payload tells whether a payload was given (at most one).
Result<bool> ParseJobContentField(std::string_view key, sj::value v, std::string_view prefix, EnqueueRequest* r,
                                  bool* have_payload);

}  // namespace delayq::wire
