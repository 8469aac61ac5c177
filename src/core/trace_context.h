// W3C Trace Context (https://www.w3.org/TR/trace-context/) on jobs: a job carries its producer's
// `traceparent` and `tracestate` in its headers, under those names, as OpenTelemetry's messaging
// conventions carry them in a message's headers. Every store keeps headers already, so the context
// is stored, moved and returned with the job wherever its headers go; the HTTP API also shows the
// two as fields of their own (docs/http-api.md, "Trace context").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {

inline constexpr std::string_view kTraceParent = "traceparent";
inline constexpr std::string_view kTraceState = "tracestate";
// The longest tracestate kept: W3C asks every vendor to pass on at least 512 characters, and
// OpenTelemetry's SDKs keep no more.
inline constexpr size_t kMaxTraceState = 512;

// The longest traceparent kept: version 00's is 55 characters; a later version may add fields.
inline constexpr size_t kMaxTraceParent = 256;

// A traceparent as W3C version 00 writes it, "00-<32 hex trace id>-<16 hex parent id>-<2 hex
// flags>" in lower case, with neither id all zeros; a later version (not ff) may add "-…" after
// those 55 characters, in visible ASCII (no space or control character), up to kMaxTraceParent
// in all. `field` names it in the error.
Status ValidateTraceParent(std::string_view value, std::string_view field);
// A tracestate: at most 32 comma-separated key=value members with W3C's characters, no key twice,
// at most kMaxTraceState bytes.
Status ValidateTraceState(std::string_view value, std::string_view field);
// Both, as they sit in a job's headers (a tracestate needs a traceparent beside it).
Status ValidateTraceHeaders(const Headers& headers, std::string_view field_prefix);

// The 32 hex digits of a valid traceparent's trace id, or nothing (for access logs).
std::optional<std::string_view> TraceIdOf(std::string_view traceparent);

}  // namespace delayq
