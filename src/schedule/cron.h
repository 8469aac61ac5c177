// Cron expressions (docs/http-api.md, Recurring schedules): 5 fields (minute hour day-of-month month day-of-week) or 6
// with seconds first. Each field is `*`, a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n` (from a to the field's
// end), or a comma-separated list of those. Months and days of the week may be named (JAN-DEC, SUN-SAT, any case); day
// of week 0 and 7 are Sunday. The macros @yearly
// (@annually), @monthly, @weekly, @daily (@midnight) and @hourly stand for their usual fields.
//
// Days follow the usual (Vixie cron) rule: when both day of month and day of week are
// restricted (neither starts with `*`), a day matches if either does; otherwise both must.
//
// This is a small parser written here: Debian packages no C++ cron library. Time zones are not
// its business: it matches civil (local) times, and schedule/occurrences.h maps them to instants
// with Howard Hinnant's date/tz over the system's tzdata.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq {

// A civil time: seconds since 1970-01-01 00:00:00 of the local calendar (no zone, no offset).
using CivilSeconds = int64_t;

class CronExpr {
 public:
  // kInvalidArgument naming the field and what it accepts, e.g.
  // `cron field 2 (hour) "25" is out of range: hours are 0-23`.
  static Result<CronExpr> Parse(std::string_view text);

  // Whether the civil time matches (to the second; 5-field expressions match second 0).
  bool Matches(CivilSeconds t) const;
  // The first matching civil time at or after `from`, or nothing within 30 years (an
  // expression such as "0 0 30 2 *" never matches; Parse refuses those).
  std::optional<CivilSeconds> NextAtOrAfter(CivilSeconds from) const;

  const std::string& text() const { return text_; }

 private:
  bool DayMatches(int64_t days_since_epoch) const;
  std::string text_;
  std::bitset<60> seconds_, minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1..31
  std::bitset<13> months_;   // 1..12
  std::bitset<7> weekdays_;  // 0 (Sunday)..6
  bool days_star_ = true, weekdays_star_ = true;
};

}  // namespace delayq
