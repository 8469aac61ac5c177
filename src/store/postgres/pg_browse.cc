// Reading a queue on the PostgreSQL store: job listings with cursors, stats, the queue list and
// the due-time histogram. Counts are of the rows as they are (the partial indexes of each state
// keep them cheap); counters and lateness are what this server saw since it opened the store.
#include <fmt/format.h>

#include <limits>

#include "core/errors.h"
#include "core/page_cursor.h"
#include "core/validate.h"
#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {
namespace {

// The WHERE and ORDER BY of a listing of one state, after (ms, id) = ($2, $3), at now = n.now.
std::string ListSql(JobState state) {
  if (state == JobState::kCompleted) {
    return fmt::format(
        "SELECT {}, delayq.now_ms(), completed_at_ms FROM delayq.completed WHERE queue = $1 AND "
        "(completed_at_ms, id) > ($2, $3) ORDER BY completed_at_ms, id LIMIT $4",
        kCompletedColumns);
  }
  std::string where, order_ms = "due_at_ms";
  switch (state) {
    case JobState::kScheduled: where = "state = 's' AND due_at_ms > n.now"; break;
    case JobState::kReady: where = "state = 's' AND due_at_ms <= n.now"; break;
    case JobState::kReserved: where = "state = 'r'"; break;
    case JobState::kDead:
      where = "state = 'd'";
      order_ms = "dead_at_ms";
      break;
    case JobState::kCompleted: break;  // above
    case JobState::kCancelled: break;  // refused by ValidateListRequest
  }
  return fmt::format(
      "WITH n AS (SELECT delayq.now_ms() AS now) SELECT {}, n.now, {} FROM delayq.jobs, n "
      "WHERE queue = $1 AND {} AND ({}, id) > ($2, $3) ORDER BY {}, id LIMIT $4",
      kJobColumns, order_ms, where, order_ms, order_ms);
}

}  // namespace

Result<JobPage> PostgresQueue::ListJobs(std::string_view queue_view, const ListRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  DELAYQ_RETURN_IF_ERROR(ValidateListRequest(request));
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  PageCursor from{std::numeric_limits<int64_t>::min(), ""};
  if (!request.cursor.empty()) {
    auto c = DecodePageCursor(request.cursor, request.state);
    if (!c.ok()) return c.status();
    auto id = Ulid::Parse(c->tail);
    if (!id) return BadPageCursor(request.cursor);
    from = {c->ms, id->ToString()};
  }
  auto r = Exec(ListSql(request.state), {Param::Of(queue), Param::Of(from.ms), Param::Of(from.tail),
                                         Param::Of(static_cast<int64_t>(request.limit) + 1)});
  if (!r.ok()) return r.status();
  JobPage page;
  int64_t bytes = 0;
  int i = 0;
  for (; i < r->size() && i < request.limit; ++i) {
    auto job = JobFromRow(queue, *r, i, r->Int(i, kJobColumnCount));
    if (!job.ok()) return job.status();
    const auto size =
        static_cast<int64_t>(job->payload.size() + job->key.size() + job->group.size() + job->result.size()) + 64;
    if (i > 0 && bytes + size > Limits::kMaxListBytes) break;
    bytes += size;
    page.jobs.push_back(std::move(*job));
  }
  if (i < r->size()) {
    page.next_cursor = EncodePageCursor(request.state, {r->Int(i - 1, kJobColumnCount + 1), page.jobs.back().id});
  }
  return page;
}

Result<QueueStats> PostgresQueue::Stats(std::string_view queue_view) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto r = Exec(
      "WITH n AS (SELECT delayq.now_ms() AS now) SELECT "
      "count(*) FILTER (WHERE j.state = 's' AND j.due_at_ms > n.now), "
      "count(*) FILTER (WHERE j.state = 's' AND j.due_at_ms <= n.now), "
      "count(*) FILTER (WHERE j.state = 'r'), count(*) FILTER (WHERE j.state = 'd'), "
      "count(*) FILTER (WHERE j.state = 's' AND j.due_at_ms > n.now AND j.due_at_ms <= n.now + 60000), "
      "min(j.due_at_ms) FILTER (WHERE j.state = 's' AND j.due_at_ms > n.now), "
      "min(j.due_at_ms) FILTER (WHERE j.state = 's' AND j.due_at_ms <= n.now), n.now, "
      "(SELECT paused FROM delayq.queues WHERE name = $1), "
      "(SELECT count(*) FROM delayq.completed c WHERE c.queue = $1) "
      "FROM n LEFT JOIN delayq.jobs j ON j.queue = $1 GROUP BY n.now",
      {Param::Of(queue)});
  if (!r.ok()) return r.status();
  if (r->IsNull(0, 8)) return errors::UnknownQueue(queue);
  QueueStats s;
  s.name = queue;
  s.scheduled = r->Int(0, 0);
  s.ready = r->Int(0, 1);
  s.reserved = r->Int(0, 2);
  s.dead = r->Int(0, 3);
  s.completed = r->Int(0, 9);
  s.due_next_60s = r->Int(0, 4);
  if (!r->IsNull(0, 5)) s.earliest_due_at_ms = r->Int(0, 5);
  if (!r->IsNull(0, 6)) s.oldest_ready_ms = std::max<int64_t>(0, r->Int(0, 7) - r->Int(0, 6));
  s.paused = r->Bool(0, 8);
  auto groups = Exec(
      "WITH n AS (SELECT delayq.now_ms() AS now) SELECT grp, count(*) FILTER (WHERE state = 's'), "
      "count(*) FILTER (WHERE state = 'r') FROM delayq.jobs, n WHERE queue = $1 AND grp <> '' AND "
      "(state = 'r' OR (state = 's' AND due_at_ms <= n.now)) GROUP BY grp "
      "ORDER BY 2 DESC, grp LIMIT $2",
      {Param::Of(queue), Param::Of(static_cast<int64_t>(Limits::kStatsGroups))});
  if (!groups.ok()) return groups.status();
  for (int i = 0; i < groups->size(); ++i) {
    s.groups.push_back({groups->Str(i, 0), groups->Int(i, 1), groups->Int(i, 2)});
  }
  std::lock_guard lock(mu_);
  const Metrics& m = MetricsLocked(queue);
  s.counters = m.counters;
  s.lateness = m.lateness.Summary();
  s.limit_wait = m.limit_wait.Summary();
  return s;
}

Result<std::vector<QueueStats>> PostgresQueue::ListQueues() {
  auto names = Exec("SELECT name FROM delayq.queues ORDER BY name");
  if (!names.ok()) return names.status();
  std::vector<QueueStats> out;
  for (int i = 0; i < names->size(); ++i) {
    auto s = Stats(names->Str(i, 0));
    if (s.ok()) out.push_back(std::move(*s));
  }
  return out;
}

// Scheduled jobs per bucket from the current minute (bucket 0 also holds those before it), as the
// other stores count them.
Result<ScheduleHistogram> PostgresQueue::Schedule(std::string_view queue_view, int64_t bucket_ms, int32_t buckets) {
  DELAYQ_RETURN_IF_ERROR(ValidateScheduleHistogram(bucket_ms, buckets));
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  auto r = Exec(
      "WITH n AS (SELECT delayq.now_ms() AS now), s AS (SELECT n.now - n.now % 60000 AS start FROM n) "
      "SELECT greatest(0, least($3::bigint, (due_at_ms - s.start) / $2::bigint)) AS b, count(*), s.start "
      "FROM delayq.jobs, n, s WHERE queue = $1 AND state = 's' AND due_at_ms > n.now GROUP BY b, s.start "
      "UNION ALL SELECT -1, 0, s.start FROM s",
      {Param::Of(queue), Param::Of(bucket_ms), Param::Of(static_cast<int64_t>(buckets))});
  if (!r.ok()) return r.status();
  ScheduleHistogram h;
  h.bucket_ms = bucket_ms;
  h.buckets.assign(static_cast<size_t>(buckets), 0);
  for (int i = 0; i < r->size(); ++i) {
    const int64_t b = r->Int(i, 0);
    h.start_ms = r->Int(i, 2);
    if (b < 0) continue;
    if (b >= buckets) {
      h.later += r->Int(i, 1);
    } else {
      h.buckets[static_cast<size_t>(b)] += r->Int(i, 1);
    }
  }
  return h;
}

}  // namespace delayq::postgres
