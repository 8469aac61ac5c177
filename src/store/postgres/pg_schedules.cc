// Schedules on the PostgreSQL store: the rows ScheduleStore asks for, in delayq.schedules (the
// encoded record and its generation), with the compare-and-set in the UPDATE's WHERE so that
// servers sharing the database never move one back. The rules are the runner's
// (schedule/runner.h), the same as on the other stores.
#include <fmt/format.h>

#include "core/validate.h"
#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {
namespace {

Status Changed(std::string_view queue, std::string_view name) {
  return Status::Conflict(
      fmt::format("schedule {} of queue {} changed meanwhile; read it again", name.substr(0, 200), queue));
}

Result<std::vector<StoredSchedule>> FromRows(const Rows& r) {
  std::vector<StoredSchedule> out;
  for (int i = 0; i < r.size(); ++i) {
    StoredSchedule s;
    DELAYQ_RETURN_IF_ERROR(DecodeSchedule(r.Bytes(i, 2), &s));
    s.queue = r.Str(i, 0);
    s.state.generation = static_cast<uint64_t>(r.Int(i, 1));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Result<std::optional<StoredSchedule>> PostgresQueue::LoadSchedule(std::string_view queue, std::string_view name) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  auto r = Exec("SELECT queue, generation, body FROM delayq.schedules WHERE queue = $1 AND name = $2",
                {Param::Of(queue), Param::Of(name)});
  if (!r.ok()) return r.status();
  auto all = FromRows(*r);
  if (!all.ok()) return all.status();
  if (all->empty()) return std::optional<StoredSchedule>{};
  return std::optional(std::move(all->front()));
}

Result<std::vector<StoredSchedule>> PostgresQueue::LoadSchedules(std::string_view queue) {
  if (!queue.empty()) DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  auto r = queue.empty() ? Exec("SELECT queue, generation, body FROM delayq.schedules ORDER BY queue, name")
                         : Exec("SELECT queue, generation, body FROM delayq.schedules WHERE queue = $1 ORDER BY name",
                                {Param::Of(queue)});
  if (!r.ok()) return r.status();
  return FromRows(*r);
}

Status PostgresQueue::StoreSchedule(const StoredSchedule& s, uint64_t expected) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(s.queue));
  auto c = Borrow();
  if (!c.ok()) return c.status();
  return InTransaction(**c, [&]() -> Status {
    if (expected == 0) {  // a new schedule: its queue exists (within the queue limit)
      DELAYQ_RETURN_IF_ERROR((*c)->Exec("SELECT delayq._queue_for_write($1)", {Param::Of(s.queue)}).status());
      auto n = (*c)->Exec("SELECT count(*) FROM delayq.schedules WHERE queue = $1", {Param::Of(s.queue)});
      if (!n.ok()) return n.status();
      if (n->Int(0, 0) >= static_cast<int64_t>(ScheduleLimits::kMaxPerQueue)) {
        return Status::ResourceExhausted(
            fmt::format("queue {} has {} schedules, the most a queue may have; delete one first", s.queue,
                        ScheduleLimits::kMaxPerQueue));
      }
      auto r = (*c)->Exec(
          "INSERT INTO delayq.schedules (queue, name, generation, body) VALUES ($1, $2, $3, $4) "
          "ON CONFLICT (queue, name) DO NOTHING RETURNING 1",
          {Param::Of(s.queue), Param::Of(s.spec.name), Param::Of(static_cast<int64_t>(FirstGeneration())),
           Param::Bytes(EncodeSchedule(s))});
      if (!r.ok()) return r.status();
      return r->empty() ? Changed(s.queue, s.spec.name) : Status::Ok();
    }
    auto r = (*c)->Exec(
        "UPDATE delayq.schedules SET generation = generation + 1, body = $4 "
        "WHERE queue = $1 AND name = $2 AND generation = $3 RETURNING 1",
        {Param::Of(s.queue), Param::Of(s.spec.name), Param::Of(static_cast<int64_t>(expected)),
         Param::Bytes(EncodeSchedule(s))});
    if (!r.ok()) return r.status();
    return r->empty() ? Changed(s.queue, s.spec.name) : Status::Ok();
  });
}

Status PostgresQueue::EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  auto r = Exec(
      "WITH gone AS (DELETE FROM delayq.schedules WHERE queue = $1 AND name = $2 AND generation = $3 RETURNING 1) "
      "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM delayq.schedules WHERE queue = $1 AND name = $2)",
      {Param::Of(queue), Param::Of(name), Param::Of(static_cast<int64_t>(expected))});
  if (!r.ok()) return r.status();
  if (r->Int(0, 0) == 1) return Status::Ok();
  if (r->Int(0, 1) == 0) return Status::NotFound("no such schedule");
  return Changed(queue, name);
}

}  // namespace delayq::postgres
