#include "http/routes.h"

#include <fmt/format.h>

#include "http/handlers.h"

namespace delayq::http {
namespace {

using namespace handlers;

constexpr RouteSpec kRoutes[] = {
    {"GET", "/", "the dashboard (a web page)", Dashboard, nullptr, true},
    {"GET", "/healthz", "the process is up", Healthz, nullptr, true},
    {"GET", "/readyz", "the store is open and can serve", Readyz, nullptr, true},
    {"GET", "/metrics", "Prometheus text", MetricsText},
    {"GET", "/openapi.json", "this API as an OpenAPI 3.1 document (docs/openapi.yaml)", OpenApiJson},
    {"GET", "/v1/version", "the server's version, commit, store and durability", VersionJson},
    {"GET", "/v1/history", "recent stats of every queue, for the dashboard's charts (?queue=Q, repeated)", HistoryJson,
     nullptr, false, "queue*"},
    {"GET", "/v1/queues", "every queue with its stats", ListQueues},
    {"GET", "/v1/queues/{q}", "a queue's stats", Stats},
    {"DELETE", "/v1/queues/{q}", "delete an empty queue (?force=true: with its jobs)", DeleteQueue, nullptr, false,
     "force"},
    {"GET", "/v1/queues/{q}/config", "a queue's config", GetConfig},
    {"PUT", "/v1/queues/{q}/config", "replace a queue's config (fields not given keep theirs)", PutConfig},
    {"POST", "/v1/queues/{q}/pause", "hand out nothing until resumed", Pause},
    {"POST", "/v1/queues/{q}/resume", "hand out again", Resume},
    {"GET", "/v1/queues/{q}/schedule", "scheduled jobs counted by due time (?bucket=1m&horizon=1h)", Schedule, nullptr,
     false, "bucket,horizon"},
    {"GET", "/v1/queues/{q}/schedules", "the queue's recurring schedules, each with its next runs", ListSchedules},
    {"GET", "/v1/queues/{q}/schedules/{name}", "a recurring schedule, with its next runs and last run", GetSchedule},
    {"PUT", "/v1/queues/{q}/schedules/{name}", "create or replace a recurring schedule (cron or every)", PutSchedule},
    {"DELETE", "/v1/queues/{q}/schedules/{name}", "delete a schedule; its jobs not yet due are cancelled",
     DeleteSchedule},
    {"POST", "/v1/queues/{q}/schedules/{name}/pause", "make no more jobs of a schedule until resumed", PauseSchedule},
    {"POST", "/v1/queues/{q}/schedules/{name}/resume", "run a paused schedule again, from now", ResumeSchedule},
    {"POST", "/v1/queues/{q}/jobs", "enqueue one job, or {\"jobs\": [...]} as a batch", nullptr, Enqueue},
    {"GET", "/v1/queues/{q}/jobs",
     "jobs in one state, a page at a time (?state=S&limit=100&cursor=C), or a job by its key (?key=K; &wait_ms=N "
     "waits for its outcome)",
     nullptr, GetJob, false, "key,state,limit,cursor,wait_ms"},
    {"PATCH", "/v1/queues/{q}/jobs", "reschedule a job by its key (?key=K)", nullptr, Reschedule, false, "key"},
    {"DELETE", "/v1/queues/{q}/jobs", "cancel a job by its key (?key=K)", nullptr, Cancel, false, "key"},
    {"GET", "/v1/queues/{q}/jobs/{id}", "a job (?wait_ms=N: once it is completed, dead or cancelled, or when N ms end)",
     nullptr, GetJob, false, "wait_ms"},
    {"PATCH", "/v1/queues/{q}/jobs/{id}", "reschedule a scheduled or ready job", nullptr, Reschedule},
    {"DELETE", "/v1/queues/{q}/jobs/{id}", "cancel a job", nullptr, Cancel},
    {"POST", "/v1/queues/{q}/reserve", "take up to max ready jobs, waiting up to wait_ms", nullptr, Reserve},
    {"POST", "/v1/queues/{q}/stream",
     "push delivery: jobs as they come due, one line each, at most max_in_flight unacknowledged", Stream},
    {"POST", "/v1/queues/{q}/ack", "acknowledge deliveries (one receipt or a batch)", nullptr, Ack},
    {"POST", "/v1/queues/{q}/nack", "end deliveries without success: retry or dead", nullptr, Nack},
    {"POST", "/v1/queues/{q}/touch", "extend the leases of deliveries", nullptr, Touch},
    {"POST", "/v1/queues/{q}/release",
     "give back deliveries that never reached their consumer: ready again, no attempt used", Release},
    {"GET", "/v1/queues/{q}/dead", "dead jobs, oldest death first, a page at a time (?limit=100&cursor=C)", DeadList,
     nullptr, false, "limit,cursor"},
    {"DELETE", "/v1/queues/{q}/dead", "delete every dead job", DeadPurge},
    {"POST", "/v1/queues/{q}/dead/replay", "make dead jobs ready again ({\"ids\": [...]}, none = all)", DeadReplay},
};

std::vector<std::string_view> Split(std::string_view pattern) {
  std::vector<std::string_view> out;
  size_t start = 1;
  while (start < pattern.size()) {
    size_t slash = pattern.find('/', start);
    if (slash == std::string_view::npos) slash = pattern.size();
    out.push_back(pattern.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

// The params of `segments` when they fit `pattern`, else false.
bool Fits(std::string_view pattern, const std::vector<std::string>& segments, std::vector<std::string>* params) {
  const std::vector<std::string_view> parts = Split(pattern);
  if (parts.size() != segments.size()) return false;
  params->clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].starts_with('{')) {
      params->push_back(segments[i]);
    } else if (parts[i] != segments[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::span<const RouteSpec> Routes() { return kRoutes; }

std::vector<std::string_view> QueryParams(const RouteSpec& route) {
  std::vector<std::string_view> out;
  std::string_view rest = route.query;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    if (name.ends_with('*')) name.remove_suffix(1);
    out.push_back(name);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

bool Repeatable(const RouteSpec& route, std::string_view name) {
  std::string_view rest = route.query;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == std::string(name) + "*") return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return false;
}

std::string RouteName(size_t route) {
  if (route >= std::size(kRoutes)) return "other";
  return fmt::format("{} {}", kRoutes[route].method, kRoutes[route].pattern);
}

RouteMatch MatchRoute(std::string_view method, const std::vector<std::string>& segments) {
  RouteMatch match;
  std::vector<std::string> params;
  for (size_t i = 0; i < std::size(kRoutes); ++i) {
    const RouteSpec& r = kRoutes[i];
    if (!Fits(r.pattern, segments, &params)) continue;
    if (r.method == method || (method == "HEAD" && r.head)) {
      match.route = i;
      match.params = std::move(params);
      match.allow.clear();
      return match;
    }
    if (match.allow.find(r.method) == std::string::npos) {
      match.allow += match.allow.empty() ? "" : ", ";
      match.allow += r.method;
    }
  }
  return match;
}

}  // namespace delayq::http
