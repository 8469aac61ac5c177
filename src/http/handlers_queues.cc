// Queue routes: the list, stats, delete, config, pause and resume, the schedule histogram and the
// dead-letter queue.
#include <fmt/format.h>

#include "core/duration.h"
#include "http/handlers.h"
#include "http/push_stream.h"
#include "http/response.h"
#include "wire/job.h"
#include "wire/queue.h"

namespace delayq::http::handlers {
namespace {

// A duration query parameter: "1m", "3600000" (ms).
Result<int64_t> QueryDuration(std::string_view name, const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() < 16) {
    return std::stoll(text);
  }
  auto d = ParseDuration(text);
  if (!d.ok()) return Status::InvalidArgument(fmt::format("{}: {}", name, d.status().message()));
  return *d;
}

}  // namespace

HttpResponse ListQueues(Context& c, const Call&) {
  auto list = c.queue.ListQueues();
  if (!list.ok()) return ErrorResponse(list.status());
  return JsonResponse(200, wire::WriteQueuesResponse(*list));
}

HttpResponse Stats(Context& c, const Call& call) {
  auto stats = c.queue.Stats(call.queue());
  if (!stats.ok()) return ErrorResponse(stats.status());
  return JsonResponse(200, wire::WriteStatsResponse(*stats));
}

HttpResponse DeleteQueue(Context& c, const Call& call) {
  bool force = false;
  for (const auto& [k, v] : call.target.query) {
    if (k != "force") continue;
    if (v != "true" && v != "false") {
      return ErrorResponse(400, "invalid_argument", fmt::format("force is \"{}\"; use true or false", v.substr(0, 40)));
    }
    force = v == "true";
  }
  auto deleted = c.queue.DeleteQueue(call.queue(), force);
  if (!deleted.ok()) return ErrorResponse(deleted.status());
  // Its reserved jobs are gone with it: the streams on it have room again at once.
  c.streams.QueueDeleted(call.queue());
  return JsonResponse(200, fmt::format(R"({{"deleted":true,"jobs":{}}})", *deleted));
}

HttpResponse GetConfig(Context& c, const Call& call) {
  auto config = c.queue.GetConfig(call.queue());
  if (!config.ok()) return ErrorResponse(config.status());
  return JsonResponse(200, wire::WriteConfigBody(*config));
}

HttpResponse PutConfig(Context& c, const Call& call) {
  auto current = c.queue.GetConfig(call.queue());
  if (!current.ok()) return ErrorResponse(current.status());
  auto config = wire::ParseConfig(call.request.body, *current);
  if (!config.ok()) return ErrorResponse(config.status());
  Status st = c.queue.SetConfig(call.queue(), *config);
  if (!st.ok()) return ErrorResponse(st);
  return JsonResponse(200, wire::WriteConfigBody(*config));
}

HttpResponse Pause(Context& c, const Call& call) {
  Status st = c.queue.Pause(call.queue());
  if (!st.ok()) return ErrorResponse(st);
  return JsonResponse(200, R"({"paused":true})");
}

HttpResponse Resume(Context& c, const Call& call) {
  Status st = c.queue.Resume(call.queue());
  if (!st.ok()) return ErrorResponse(st);
  return JsonResponse(200, R"({"paused":false})");
}

HttpResponse Schedule(Context& c, const Call& call) {
  const std::string* b = call.target.Query("bucket");
  const std::string* h = call.target.Query("horizon");
  auto bucket = QueryDuration("bucket", b ? *b : "1m");
  if (!bucket.ok()) return ErrorResponse(bucket.status());
  auto horizon = QueryDuration("horizon", h ? *h : "1h");
  if (!horizon.ok()) return ErrorResponse(horizon.status());
  if (*bucket <= 0) return ErrorResponse(Status::InvalidArgument("bucket must be positive"));
  const int64_t n = (*horizon + *bucket - 1) / *bucket;
  if (n < 1 || n > 10'000) {
    return ErrorResponse(
        Status::InvalidArgument(fmt::format("horizon / bucket gives {} buckets; it must give 1 to 10000", n)));
  }
  auto hist = c.queue.Schedule(call.queue(), *bucket, static_cast<int32_t>(n));
  if (!hist.ok()) return ErrorResponse(hist.status());
  return JsonResponse(200, wire::WriteScheduleResponse(*hist));
}

namespace {

// One page of `state` from the call's limit and cursor (the same on /jobs?state=S and /dead).
HttpResponse Page(Context& c, const Call& call, JobState state) {
  ListRequest request;
  request.state = state;
  if (const std::string* l = call.target.Query("limit")) {
    if (l->empty() || l->size() > 6 || l->find_first_not_of("0123456789") != std::string::npos) {
      return ErrorResponse(Status::InvalidArgument(
          fmt::format("limit \"{}\" must be a number from 1 to {}", l->substr(0, 20), Limits::kMaxListPage)));
    }
    request.limit = static_cast<int32_t>(std::stoll(*l));
  }
  if (const std::string* cursor = call.target.Query("cursor")) request.cursor = *cursor;
  auto page = c.queue.ListJobs(call.queue(), request);
  if (!page.ok()) return ErrorResponse(page.status());
  return JsonResponse(200, wire::WriteJobPageResponse(*page));
}

}  // namespace

HttpResponse ListJobs(Context& c, const Call& call) {
  const std::string& name = *call.target.Query("state");
  auto state = ParseJobState(name);
  if (!state || *state == JobState::kCancelled) {
    return ErrorResponse(Status::InvalidArgument(fmt::format(
        "state \"{}\" is not a job state: give scheduled, ready, reserved, dead or completed", name.substr(0, 40))));
  }
  return Page(c, call, *state);
}

HttpResponse DeadList(Context& c, const Call& call) { return Page(c, call, JobState::kDead); }

HttpResponse DeadPurge(Context& c, const Call& call) {
  auto n = c.queue.PurgeDead(call.queue());
  if (!n.ok()) return ErrorResponse(n.status());
  return JsonResponse(200, wire::WriteCountResponse("purged", *n));
}

HttpResponse DeadReplay(Context& c, const Call& call) {
  auto ids = wire::ParseReplayRequest(call.request.body);
  if (!ids.ok()) return ErrorResponse(ids.status());
  auto n = c.queue.ReplayDead(call.queue(), *ids);
  if (!n.ok()) return ErrorResponse(n.status());
  return JsonResponse(200, wire::WriteCountResponse("replayed", *n));
}

}  // namespace delayq::http::handlers
