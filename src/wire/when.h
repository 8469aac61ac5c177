// When a job is due, on the wire: "delay_ms" (integer ms), "delay" ("30m", "1h30m"; core/duration.h)
// or "deliver_at" (epoch ms or RFC 3339), at most one of them. Part of an enqueue request
// (enqueue.h) and the whole body of a reschedule (PATCH /v1/queues/{q}/jobs/{id}).
#pragma once

#include <string>
#include <string_view>

#include "delayq/job.h"
#include "delayq/status.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::wire {

// Writes delay_ms or deliver_at (as epoch ms) into the open object, or nothing for "now".
void WriteWhen(JsonWriter& w, const When& when);
// Reads `key` into `when` when it is one of the three fields (true), else false; `prefix` names
// the job in a batch ("jobs[3].") in errors.
Result<bool> ParseWhenField(std::string_view key, sj::value v, std::string_view prefix, When* when);

std::string WriteRescheduleRequest(const When& when);
// A reschedule body must name a due time.
Result<When> ParseRescheduleRequest(std::string_view body);

}  // namespace delayq::wire
