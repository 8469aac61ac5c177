// `delayq schedule set|ls|get|rm|pause|resume QUEUE [NAME]`: recurring schedules (docs/http-api.md, Recurring
// schedules).
#include "wire/schedule.h"
#include "cli/cli_common.h"
#include "core/duration.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::cli {
namespace {

void PrintSchedule(const RecurringSchedule& s) {
  std::printf("%s\n", s.spec.name.c_str());
  if (!s.spec.cron.empty()) {
    std::printf("  cron        %s (%s)\n", s.spec.cron.c_str(), s.spec.timezone.c_str());
  } else {
    std::printf("  every       %s\n", FormatDuration(s.spec.every_ms).c_str());
  }
  std::printf("  state       %s, misfire %s\n", s.paused ? "paused" : "running", MisfireName(s.spec.misfire));
  std::printf("  last run    %s\n", s.last_run_at_ms ? FormatTimestamp(*s.last_run_at_ms).c_str() : "none yet");
  if (s.next_runs.empty()) std::printf("  next runs   none\n");
  for (size_t i = 0; i < s.next_runs.size(); ++i) {
    std::printf("  %s %s\n", i == 0 ? "next runs  " : "           ", FormatTimestamp(s.next_runs[i]).c_str());
  }
}

void Print(const RecurringSchedule& s, bool json) {
  if (json) {
    std::printf("%s\n", wire::WriteSchedule(s).c_str());
  } else {
    PrintSchedule(s);
  }
}

struct ScheduleArgs {
  std::string queue, name, cron, every, timezone = "UTC", payload, misfire = "run_once", start_at, end_at;
  std::vector<std::string> headers;
  int32_t max_attempts = 0, priority = 0;
  std::string group;
};

// The spec `set` asks for, from its flags (a payload that is not JSON goes as a JSON string).
Result<ScheduleSpec> SpecOf(const ScheduleArgs& a) {
  ScheduleSpec spec;
  spec.name = a.name;
  spec.cron = a.cron;
  if (!a.every.empty()) spec.every_ms = Duration("--every", a.every);
  spec.timezone = a.timezone;
  if (!a.payload.empty()) {
    if (wire::IsJsonValue(a.payload)) {
      spec.payload = a.payload;
    } else {
      wire::JsonWriter w;
      w.String(a.payload);
      spec.payload = w.Take();
    }
  }
  for (const auto& h : a.headers) {
    auto eq = h.find('=');
    if (eq == std::string::npos || eq == 0) return Status::InvalidArgument("--header \"" + h + "\" must be name=value");
    spec.headers[h.substr(0, eq)] = h.substr(eq + 1);
  }
  if (a.max_attempts) spec.max_attempts = a.max_attempts;
  spec.priority = a.priority;
  spec.group = a.group;
  auto misfire = ParseMisfire(a.misfire);
  if (!misfire) return Status::InvalidArgument("--misfire \"" + a.misfire + "\" is not skip, run_once or run_all");
  spec.misfire = *misfire;
  if (!a.start_at.empty()) spec.start_at_ms = Timestamp("--start-at", a.start_at);
  if (!a.end_at.empty()) spec.end_at_ms = Timestamp("--end-at", a.end_at);
  return spec;
}

void AddSetCommand(CLI::App* sched, const std::shared_ptr<ScheduleArgs>& a, Global& g, int& rc) {
  auto* set = sched->add_subcommand(
      "set", "Create or replace a schedule: delayq schedule set reports nightly --cron '0 3 * * *' --tz Europe/Berlin");
  set->add_option("queue", a->queue, "Queue name")->required();
  set->add_option("name", a->name, "Schedule name")->required();
  set->add_option("--cron", a->cron, "5 fields (or 6, seconds first): '*/5 * * * *', '0 9 * * MON-FRI'");
  set->add_option("--every", a->every, "Or a fixed period: 90s, 15m, 1h");
  set->add_option("--tz,--timezone", a->timezone, "IANA time zone of --cron (default UTC)");
  set->add_option("--payload", a->payload, "Each job's payload: JSON is sent as is, other text as a JSON string");
  set->add_option("-H,--header", a->headers, "Header name=value of each job (repeatable)");
  set->add_option("--max-attempts", a->max_attempts, "Deliveries before a job goes dead");
  set->add_option("--priority", a->priority, "Each run's priority, 0..9 (higher first within its group)");
  set->add_option("--group", a->group, "Each run's group (a tenant: reserves take the groups in turn)");
  set->add_option("--misfire", a->misfire, "Runs missed while no server ran: skip | run_once | run_all")
      ->capture_default_str();
  set->add_option("--start-at", a->start_at, "No run before this time (RFC 3339 or epoch ms)");
  set->add_option("--end-at", a->end_at, "No run after this time");
  set->callback(Run(rc, [a, &g]() -> Status {
    auto spec = SpecOf(*a);
    if (!spec.ok()) return spec.status();
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto s = (*client)->PutSchedule(a->queue, *spec);
    if (!s.ok()) return s.status();
    Print(*s, g.json);
    return Status::Ok();
  }));
}

}  // namespace

void AddScheduleCommand(CLI::App& app, Global& g, int& rc) {
  auto a = std::make_shared<ScheduleArgs>();
  auto* sched = app.add_subcommand("schedule", "Recurring schedules: set, ls, get, rm, pause, resume");
  sched->require_subcommand(1);
  AddSetCommand(sched, a, g, rc);

  auto* ls = sched->add_subcommand("ls", "A queue's schedules with their next runs");
  ls->add_option("queue", a->queue, "Queue name")->required();
  ls->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto list = (*client)->ListSchedules(a->queue);
    if (!list.ok()) return list.status();
    if (g.json) {
      std::printf("%s\n", wire::WriteSchedules(*list).c_str());
      return Status::Ok();
    }
    if (list->empty()) std::printf("queue %s has no schedules\n", a->queue.c_str());
    for (const auto& s : *list) PrintSchedule(s);
    return Status::Ok();
  }));

  auto named = [&](const char* name, const char* help) {
    auto* c = sched->add_subcommand(name, help);
    c->add_option("queue", a->queue, "Queue name")->required();
    c->add_option("name", a->name, "Schedule name")->required();
    return c;
  };
  named("get", "One schedule")->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto s = (*client)->GetSchedule(a->queue, a->name);
    if (!s.ok()) return s.status();
    Print(*s, g.json);
    return Status::Ok();
  }));
  named("rm", "Delete a schedule (its jobs not yet due are cancelled)")->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    DELAYQ_RETURN_IF_ERROR((*client)->DeleteSchedule(a->queue, a->name));
    std::printf(g.json ? "{\"deleted\":true}\n" : "deleted schedule %s of %s\n", a->name.c_str(), a->queue.c_str());
    return Status::Ok();
  }));
  for (bool pause : {true, false}) {
    named(pause ? "pause" : "resume", pause ? "Make no more jobs until resumed" : "Run again, from now")
        ->callback(Run(rc, [a, &g, pause]() -> Status {
          auto client = MakeClient(g);
          if (!client.ok()) return client.status();
          auto s = (*client)->PauseSchedule(a->queue, a->name, pause);
          if (!s.ok()) return s.status();
          Print(*s, g.json);
          return Status::Ok();
        }));
  }
}

}  // namespace delayq::cli
