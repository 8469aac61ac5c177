// A job on the wire, as GET /v1/queues/{q}/jobs/{id} answers it and the listings list it:
// {"id", "queue", "state", "due_at", "attempt", "max_attempts", "key", "payload" | "payload_base64",
//  "headers", "created_at", "last_error"[, "lease_deadline" when reserved][, "dead_at" when dead],
//  "priority", "group", "traceparent", "tracestate"}.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"
#include "wire/json_writer.h"

namespace delayq::wire {

// The payload as "payload" (stored JSON, verbatim) or "payload_base64" (binary, or not JSON).
void WritePayload(JsonWriter& w, std::string_view payload, bool binary);
void WriteHeaders(JsonWriter& w, const Headers& headers);
// The trace context kept in the headers (core/trace_context.h) as "traceparent" and "tracestate":
// null when absent with `nulls`, left out without.
void WriteTraceContext(JsonWriter& w, const Headers& headers, bool nulls);
void WriteJob(JsonWriter& w, const Job& job);
std::string WriteJobResponse(const Job& job);
// A page of a listing: {"jobs": [...], "next_cursor": "..." | null}.
std::string WriteJobPageResponse(const JobPage& page);

Result<Job> ParseJobResponse(std::string_view body);
Result<JobPage> ParseJobPageResponse(std::string_view body);

}  // namespace delayq::wire
