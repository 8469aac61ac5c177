// Queue administration on the PostgreSQL store: configs, pause, delete, and the dead letters
// (replay, purge). The twin of the Redis store's redis_queue_admin.cc and redis_dead.cc.
#include <fmt/format.h>

#include "core/errors.h"
#include "core/validate.h"
#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {

Result<QueueConfig> PostgresQueue::GetConfig(std::string_view queue_view) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  ForgetConfig(std::string(queue_view));  // read from the database: another server may have set it
  auto config = ConfigOf(std::string(queue_view));
  if (config.code() == Code::kNotFound) return QueueConfig{};
  return config;
}

Status PostgresQueue::SetConfig(std::string_view queue_view, const QueueConfig& config) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  DELAYQ_RETURN_IF_ERROR(ValidateConfig(config));
  const std::string queue(queue_view);
  const BackoffPolicy& b = config.backoff;
  Status s;
  {
    auto c = Borrow();
    if (!c.ok()) return c.status();
    s = InTransaction(**c, [&]() -> Status {
      DELAYQ_RETURN_IF_ERROR((*c)->Exec("SELECT delayq._queue_for_write($1)", {Param::Of(queue)}).status());
      return (*c)
          ->Exec(
              "UPDATE delayq.queues SET max_attempts = $2, backoff_base_ms = $3, backoff_factor = $4, "
              "backoff_max_ms = $5, backoff_jitter = $6, lease_ms = $7, max_payload = $8, dead_retention_ms = $9, "
              "max_delay_ms = $10, rate_per_s = $11, burst = $12, max_reserved = $13, group_max_reserved = $14, "
              "priority_aging_ms = $15, keep_completed_ms = $16, tokens = CASE WHEN rate_per_s = $11 AND burst = $12 "
              "THEN tokens END, "
              "tokens_at_us = CASE WHEN rate_per_s = $11 AND burst = $12 THEN tokens_at_us END "
              "WHERE name = $1",
              {Param::Of(queue), Param::Of(static_cast<int64_t>(config.max_attempts)), Param::Of(b.base_ms),
               Param::Of(fmt::format("{}", b.factor)), Param::Of(b.max_ms), Param::Of(fmt::format("{}", b.jitter)),
               Param::Of(config.lease_ms), Param::Of(config.max_payload), Param::Of(config.dead_retention_ms),
               Param::Of(config.max_delay_ms), Param::Of(fmt::format("{}", config.rate_per_s)), Param::Of(config.burst),
               Param::Of(config.max_reserved), Param::Of(config.group_max_reserved),
               Param::Of(config.priority_aging_ms), Param::Of(config.keep_completed_ms)})
          .status();
    });
  }  // the connection is given back before announcing
  ForgetConfig(queue);
  if (!s.ok()) return s;
  AnnounceReady(queue);  // a limit raised lets waiting reserves on
  {
    std::lock_guard lock(mu_);  // a shorter dead retention may have run out already
    next_sweep_.Note(0);        // at once (and again, if a sweep is running on the old retention)
    poked_ = true;
    cv_.notify_all();
  }
  return s;
}

Result<int64_t> PostgresQueue::DeleteQueue(std::string_view queue_view, bool force) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto c = Borrow();
  if (!c.ok()) return c.status();
  int64_t deleted = 0;
  Status s = InTransaction(**c, [&]() -> Status {
    // Waits for the transactions writing into the queue, and holds back new ones until this one
    // ends (delayq._queue_for_write takes the lock shared): no job outlives its queue. Read
    // committed, so that the statements after the wait see the jobs those transactions committed
    // (a snapshot from before the wait would delete the queue and leave them).
    DELAYQ_RETURN_IF_ERROR((*c)->Exec("SET TRANSACTION ISOLATION LEVEL READ COMMITTED").status());
    DELAYQ_RETURN_IF_ERROR(
        (*c)->Exec("SELECT pg_advisory_xact_lock(1685222757, hashtext($1))", {Param::Of(queue)}).status());
    auto row = (*c)->Exec("SELECT 1 FROM delayq.queues WHERE name = $1 FOR UPDATE", {Param::Of(queue)});
    if (!row.ok()) return row.status();
    if (row->empty()) return errors::UnknownQueue(queue);
    auto n = (*c)->Exec("SELECT count(*) FROM delayq.jobs WHERE queue = $1", {Param::Of(queue)});
    if (!n.ok()) return n.status();
    deleted = n->Int(0, 0);
    if (deleted > 0 && !force) return errors::QueueNotEmpty(queue, deleted);
    // Its waits for an outcome end (their jobs are gone, as if cancelled).
    DELAYQ_RETURN_IF_ERROR((*c)->Exec("SELECT pg_notify('delayq', 'outcome cancelled ' || id || ' ' || queue) "
                                      "FROM delayq.waiting WHERE queue = $1",
                                      {Param::Of(queue)})
                               .status());
    // Its completed jobs go with it (they never keep a queue from being deleted).
    for (const char* table : {"jobs", "completed", "kept_keys", "group_turns", "schedules", "waiting"}) {
      DELAYQ_RETURN_IF_ERROR(
          (*c)->Exec(fmt::format("DELETE FROM delayq.{} WHERE queue = $1", table), {Param::Of(queue)}).status());
    }
    return (*c)->Exec("DELETE FROM delayq.queues WHERE name = $1", {Param::Of(queue)}).status();
  });
  ForgetConfig(queue);
  if (!s.ok()) return s;
  std::lock_guard lock(mu_);
  metrics_.erase(queue);
  return deleted;
}

namespace {

Status SetPaused(Connection& c, const std::string& queue, bool paused) {
  return InTransaction(c, [&]() -> Status {
    DELAYQ_RETURN_IF_ERROR(c.Exec("SELECT delayq._queue_for_write($1)", {Param::Of(queue)}).status());
    return c.Exec("UPDATE delayq.queues SET paused = $2 WHERE name = $1", {Param::Of(queue), Param::Of(paused)})
        .status();
  });
}

}  // namespace

Status PostgresQueue::Pause(std::string_view queue_view) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  auto c = Borrow();
  if (!c.ok()) return c.status();
  return SetPaused(**c, std::string(queue_view), true);
}

Status PostgresQueue::Resume(std::string_view queue_view) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  Status s;
  {
    auto c = Borrow();
    if (!c.ok()) return c.status();
    s = SetPaused(**c, queue, false);
  }
  if (s.ok()) AnnounceReady(queue);
  return s;
}

Result<int64_t> PostgresQueue::ReplayDead(std::string_view queue_view, std::span<const std::string> ids) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  Param which = Param::Null();
  if (!ids.empty()) {
    std::string list = "{";
    for (size_t i = 0; i < ids.size(); ++i) {
      auto id = Ulid::Parse(ids[i]);
      if (!id) return errors::NotAJobId(fmt::format("ids[{}]", i), ids[i]);
      if (list.size() > 1) list.push_back(',');
      list += id->ToString();
    }
    list.push_back('}');
    which = Param::Of(list);
  }
  auto r = Exec("SELECT delayq._replay($1, $2::text[])", {Param::Of(queue), which});
  if (!r.ok()) return r.status();
  if (r->Int(0, 0) > 0) AnnounceReady(queue);
  return r->Int(0, 0);
}

Result<int64_t> PostgresQueue::PurgeDead(std::string_view queue_view) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  auto r =
      Exec("WITH d AS (DELETE FROM delayq.jobs WHERE queue = $1 AND state = 'd' RETURNING 1) SELECT count(*) FROM d",
           {Param::Of(queue)});
  if (!r.ok()) return r.status();
  return r->Int(0, 0);
}

}  // namespace delayq::postgres
