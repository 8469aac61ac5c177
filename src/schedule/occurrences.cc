#include "schedule/occurrences.h"

#include <date/tz.h>
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "core/validate.h"
#include "schedule/floor_div.h"

namespace delayq {
namespace {

Status ValidateScheduleName(std::string_view name) {
  // The same characters and length as a queue name (core/validate.h), said of a schedule.
  Status s = ValidateQueueName(name);
  if (s.ok()) return s;
  if (name == "." || name == "..") {
    return Status::InvalidArgument(fmt::format(
        "schedule name \"{}\" is a path's dot segment, which proxies and browsers take out of a URL; give a name "
        "with a letter, digit, '_', ':' or '-'",
        name));
  }
  return Status::InvalidArgument(fmt::format("schedule name \"{}\" must have 1 to {} characters of [A-Za-z0-9._:-]",
                                             name.substr(0, 200), Limits::kMaxQueueName));
}

// The system's time zone database, read once (~6 ms) by whichever thread first needs a zone.
// date builds it as a function-local static inside libdate-tz, which is not built with
// ThreadSanitizer: TSan cannot see that static's guard, and took the first reader on another thread
// for a race (a server under TSan stopped on two concurrent schedule puts). Reached through
// std::call_once here, the load visibly happens before every later lookup.
const date::time_zone* LocateZone(const std::string& name) {
  static std::once_flag once;
  std::call_once(once, [] { (void)date::get_tzdb(); });
  return date::locate_zone(name);
}

}  // namespace

std::string OccurrenceKey(std::string_view schedule, int64_t occurrence_ms) {
  return fmt::format("schedule:{}:{}", schedule, occurrence_ms);
}

Result<Occurrences> Occurrences::Compile(const ScheduleSpec& spec) {
  DELAYQ_RETURN_IF_ERROR(ValidateScheduleName(spec.name));
  Occurrences o;
  if (spec.cron.empty() == (spec.every_ms == 0)) {
    return Status::InvalidArgument(
        "a schedule needs exactly one of cron (\"*/5 * * * *\") and every (\"90s\"); this one has " +
        std::string(spec.cron.empty() ? "neither" : "both"));
  }
  if (!spec.cron.empty()) {
    auto cron = CronExpr::Parse(spec.cron);
    if (!cron.ok()) return cron.status();
    o.cron_ = std::move(*cron);
  } else if (spec.every_ms < ScheduleLimits::kMinEveryMs || spec.every_ms > ScheduleLimits::kMaxEveryMs) {
    return Status::InvalidArgument(fmt::format("every is {} ms; it must be between 1s ({} ms) and 366d ({} ms)",
                                               spec.every_ms, ScheduleLimits::kMinEveryMs,
                                               ScheduleLimits::kMaxEveryMs));
  }
  o.every_ms_ = spec.every_ms;
  try {
    o.zone_ = LocateZone(spec.timezone);
  } catch (const std::exception&) {
    return Status::InvalidArgument(fmt::format(
        "timezone \"{}\" is not in the system's time zone database; use an IANA name such as \"Europe/Berlin\" or "
        "\"UTC\"",
        spec.timezone.substr(0, 200)));
  }
  if (spec.start_at_ms) DELAYQ_RETURN_IF_ERROR(ValidateDate(*spec.start_at_ms, "start_at"));
  if (spec.end_at_ms) DELAYQ_RETURN_IF_ERROR(ValidateDate(*spec.end_at_ms, "end_at"));
  if (spec.start_at_ms && spec.end_at_ms && *spec.end_at_ms <= *spec.start_at_ms) {
    return Status::InvalidArgument(fmt::format(
        "end_at ({}) is not after start_at ({}); a schedule ends after it starts", *spec.end_at_ms, *spec.start_at_ms));
  }
  o.start_at_ms_ = spec.start_at_ms;
  o.end_at_ms_ = spec.end_at_ms;
  return o;
}

std::optional<int64_t> Occurrences::CronNextAfter(int64_t after_ms) const {
  using namespace std::chrono;
  // Occurrences are whole seconds: the first candidate is the next second after `after_ms`.
  const sys_seconds from{seconds{FloorDiv(after_ms, 1000) + 1}};
  int64_t civil = zone_->to_local(from).time_since_epoch().count();
  // A local time that happens twice maps to its first instant, which may lie before `after`
  // (the clock went back): such candidates are passed over, so it fires once.
  for (int guard = 0; guard < 100'000; ++guard) {
    auto next = cron_->NextAtOrAfter(civil);
    if (!next) return std::nullopt;
    const date::local_seconds local{seconds{*next}};
    // choose::earliest: a time the clock skips maps to the moment it jumps.
    const int64_t at_ms = zone_->to_sys(local, date::choose::earliest).time_since_epoch().count() * 1000;
    if (at_ms > after_ms) return at_ms;
    civil = *next + 1;
  }
  return std::nullopt;
}

std::optional<int64_t> Occurrences::NextAfter(int64_t after_ms) const {
  if (start_at_ms_ && after_ms < *start_at_ms_) after_ms = *start_at_ms_ - 1;  // start_at itself may be one
  std::optional<int64_t> next;
  if (cron_) {
    next = CronNextAfter(after_ms);
  } else {
    const int64_t anchor = start_at_ms_.value_or(0);
    next = anchor + (FloorDiv(after_ms - anchor, every_ms_) + 1) * every_ms_;
  }
  if (next && end_at_ms_ && *next > *end_at_ms_) return std::nullopt;
  return next;
}

std::vector<int64_t> Occurrences::Next(int64_t after_ms, int n) const {
  std::vector<int64_t> out;
  for (auto next = NextAfter(after_ms); next && static_cast<int>(out.size()) < n; next = NextAfter(*next)) {
    out.push_back(*next);
  }
  return out;
}

std::vector<int64_t> Occurrences::Between(int64_t from_ms, int64_t to_ms, size_t limit, bool latest) const {
  std::vector<int64_t> out;
  if (to_ms <= from_ms || limit == 0) return out;
  auto collect = [&](int64_t start, size_t cap) {
    out.clear();
    for (auto next = NextAfter(start); next && *next <= to_ms && out.size() < cap; next = NextAfter(*next)) {
      out.push_back(*next);
    }
  };
  if (!latest) {
    collect(from_ms, limit);
    return out;
  }
  // The last `limit` of a span that may hold millions (a server down for days under a schedule
  // of every second): look back from to_ms over windows that grow eightfold.
  for (int64_t window = 60'000;; window *= 8) {
    const int64_t start = std::max(from_ms, to_ms - window);
    collect(start, SIZE_MAX);
    if (out.size() >= limit || start == from_ms) break;
  }
  if (out.size() > limit) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(limit));
  return out;
}

}  // namespace delayq
