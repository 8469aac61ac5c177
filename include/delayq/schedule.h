// Recurring schedules (docs/http-api.md, Recurring schedules): a schedule of a queue turns each occurrence of a cron
// expression or a fixed period into one ordinary job of that queue, due at the occurrence, with
// key "schedule:{name}:{occurrence ms}" and header "delayq-schedule: {name}". Occurrences are made
// into jobs ahead of time (the next one always exists as a scheduled job), so they are delivered
// with the scheduler's precision; servers sharing a store make one job per occurrence between
// them. Queue::PutSchedule and the other schedule methods (delayq/queue.h) manage them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"

namespace delayq {

// What happens to occurrences that passed while no server ran the schedule (all were stopped, or
// none had learned of it yet). An occurrence already made into a job is a job like any other and
// is delivered in any case.
enum class Misfire {
  kSkip,     // none of them runs
  kRunOnce,  // one job, for the latest of them, due at once (the default)
  kRunAll,   // one job each, due at once, for the latest kMaxMisfireRuns of them
};
// "skip" | "run_once" | "run_all".
inline const char* MisfireName(Misfire misfire) {
  return misfire == Misfire::kSkip ? "skip" : misfire == Misfire::kRunAll ? "run_all" : "run_once";
}
inline std::optional<Misfire> ParseMisfire(std::string_view name) {
  if (name == "skip") return Misfire::kSkip;
  if (name == "run_once") return Misfire::kRunOnce;
  if (name == "run_all") return Misfire::kRunAll;
  return std::nullopt;
}

struct ScheduleSpec {
  std::string name;  // [A-Za-z0-9._:-]{1,128}, unique in its queue
  // Exactly one of cron and every_ms. cron: 5 fields, or 6 with seconds first (schedule/cron.h
  // lists what they accept), read in `timezone`.
  std::string cron;
  int64_t every_ms = 0;  // 1 000 .. 366 days: occurrences at start_at + k * every (epoch + k * every without)
  // An IANA time zone name ("Europe/Berlin"), from the system's tzdata; default UTC. Only cron
  // reads it: a local time the clock skips (spring forward) fires when the clock jumps; one that
  // happens twice (fall back) fires once, the first time. `every` is a period of real time.
  std::string timezone = "UTC";
  // Each job's payload (default JSON null), binary flag, headers and max_attempts (default: the
  // queue's), as for EnqueueRequest.
  std::string payload = "null";
  bool binary = false;
  Headers headers;
  std::optional<int32_t> max_attempts;
  // Each run's priority (0..9) and group (at most 128 bytes), as for EnqueueRequest.
  int32_t priority = 0;
  std::string group;
  Misfire misfire = Misfire::kRunOnce;
  std::optional<int64_t> start_at_ms;  // no occurrence before this
  std::optional<int64_t> end_at_ms;    // none after this
  bool operator==(const ScheduleSpec&) const = default;
};

// A schedule as Queue::GetSchedule answers it.
struct RecurringSchedule {
  std::string queue;
  ScheduleSpec spec;
  bool paused = false;
  std::vector<int64_t> next_runs;         // the next occurrences (up to 5), none when paused or ended
  std::optional<int64_t> last_run_at_ms;  // the latest occurrence made into a job that came due
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

// How a store's schedule runner works (schedule/runner.h); the defaults suit production, tests
// shorten them.
struct ScheduleRunnerOptions {
  int64_t lead_ms = 30'000;    // occurrences up to this far ahead are jobs already (and always the next)
  int64_t refresh_ms = 5'000;  // every schedule is read again this often (other servers' changes)
  int32_t max_per_pass = 100;  // occurrences one pass makes into jobs at most
};

struct ScheduleLimits {
  static constexpr size_t kMaxPerQueue = 1'000;    // schedules per queue
  static constexpr int32_t kMaxMisfireRuns = 100;  // Misfire::kRunAll runs at most this many
  static constexpr int64_t kMinEveryMs = 1'000;
  static constexpr int64_t kMaxEveryMs = 366LL * 86'400'000;
  static constexpr int32_t kNextRuns = 5;  // Schedule::next_runs
  // A schedule makes its runs into jobs ahead of time, up to its queue's max_delay_ms less
  // kReachMarginMs (a margin for a store whose clock is another host's, Redis) and at most
  // ScheduleRunnerOptions::lead_ms: a queue whose max_delay_ms is under kMinQueueMaxDelayMs
  // cannot hold a run made ahead, so it takes no schedule (PutSchedule refuses it, and SetConfig
  // refuses to lower max_delay_ms under it while the queue has one).
  static constexpr int64_t kReachMarginMs = 1'000;
  static constexpr int64_t kMinQueueMaxDelayMs = 2'000;
};

}  // namespace delayq
