// When a schedule's occurrences are (delayq/schedule.h): its spec validated and compiled once, then
// asked for the occurrences after a moment. Cron expressions are matched in civil time
// (schedule/cron.h) and mapped to instants in the schedule's time zone by Howard Hinnant's date/tz
// over the system's tzdata (GCC 12's <chrono> has no time zone database); `every` is arithmetic.
// Immutable after Compile: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "delayq/schedule.h"
#include "delayq/status.h"
#include "schedule/cron.h"

namespace date {
class time_zone;
}

namespace delayq {

// The key and header each occurrence's job carries.
std::string OccurrenceKey(std::string_view schedule, int64_t occurrence_ms);
inline constexpr const char* kScheduleHeader = "delayq-schedule";
// The revision of the schedule a run's job was made under (runner.cc): a job of another revision
// found under a run's key is an orphan of a pass that raced a replace, and is made again.
inline constexpr const char* kScheduleRevisionHeader = "delayq-schedule-rev";

class Occurrences {
 public:
  // kInvalidArgument naming the field: a bad name, neither or both of cron and every, a cron
  // expression that does not parse or never fires, an unknown time zone, every out of range,
  // end_at not after start_at, misfire unknown.
  static Result<Occurrences> Compile(const ScheduleSpec& spec);

  // The first occurrence strictly after `after_ms`, or none (past end_at).
  std::optional<int64_t> NextAfter(int64_t after_ms) const;
  // Up to `n` occurrences strictly after `after_ms`.
  std::vector<int64_t> Next(int64_t after_ms, int n) const;
  // The occurrences in (from_ms, to_ms], at most `limit`: the first ones, or with `latest` the
  // last ones (ascending either way).
  std::vector<int64_t> Between(int64_t from_ms, int64_t to_ms, size_t limit, bool latest) const;

 private:
  std::optional<int64_t> CronNextAfter(int64_t after_ms) const;
  std::optional<CronExpr> cron_;
  const date::time_zone* zone_ = nullptr;
  int64_t every_ms_ = 0;
  std::optional<int64_t> start_at_ms_, end_at_ms_;
};

}  // namespace delayq
