// Recurring schedules on the wire (docs/http-api.md, Recurring schedules):
//   PUT /v1/queues/{q}/schedules/{name}
//     {"cron": "*/5 * * * *" | "every": "90s" (or ms), "timezone": "Europe/Berlin",
//      "payload": <any JSON> | "payload_base64", "headers": {...}, "max_attempts": 5,
//      "misfire": "skip" | "run_once" | "run_all", "start_at": ms | RFC 3339, "end_at": ...}
//   -> a schedule: {"name", "queue", "cron" | "every" (a duration, "1m30s"), "timezone",
//      "misfire", "paused", "next_runs": [ms...], "last_run_at": ms | null, "payload" |
//      "payload_base64", "headers", "max_attempts" (when set), "start_at", "end_at" (when set),
//      "created_at", "updated_at"}
//   GET /v1/queues/{q}/schedules -> {"schedules": [<schedule>...]}
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/schedule.h"
#include "delayq/status.h"

namespace delayq::wire {

// The body of a PUT: every field but the name (the path gives it). kInvalidArgument names the
// field; the rules a store checks (cron syntax, time zone, ranges) come after, from the store.
Result<ScheduleSpec> ParseScheduleSpec(std::string_view body, std::string_view name);
std::string WriteScheduleSpec(const ScheduleSpec& spec);

std::string WriteSchedule(const RecurringSchedule& schedule);
std::string WriteSchedules(std::span<const RecurringSchedule> schedules);
Result<RecurringSchedule> ParseSchedule(std::string_view body);
Result<std::vector<RecurringSchedule>> ParseSchedules(std::string_view body);

}  // namespace delayq::wire
