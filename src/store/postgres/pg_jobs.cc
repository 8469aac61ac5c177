// Jobs on the PostgreSQL store: enqueue (one or a batch), get, cancel, reschedule. The twin of the
// embedded store's engine_jobs.cc and the Redis store's redis_jobs.cc; the transitions are
// delayq._put, _cancel and _reschedule (sql/v1_2_functions.sql), which the SQL API calls too.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "core/errors.h"
#include "core/validate.h"
#include "delayq/clock.h"
#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {
namespace {

const char* OnKey(const EnqueueRequest& r) {
  if (r.debounce) return "debounce";
  if (r.replace) return "replace";
  return "dedupe";
}

std::vector<Param> PutParams(const std::string& queue, const std::string& id, const EnqueueRequest& r) {
  return {Param::Of(queue),
          Param::Of(id),
          Param::Bytes(r.payload),
          Param::Of(r.binary),
          HeadersParam(r.headers),
          Param::Maybe(r.when.delay_ms),
          Param::Maybe(r.when.deliver_at_ms),
          Param::Maybe(r.max_attempts),
          r.key.empty() ? Param::Null() : Param::Of(r.key),
          Param::Of(OnKey(r)),
          Param::Of(r.key_ttl_ms),
          Param::Of(static_cast<int64_t>(r.priority)),
          Param::Of(r.group)};
}

// A Postgres array literal of optional values: NULL for none, the others quoted (TextArray's rule).
std::string ArrayLiteral(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    if (!items[i]) {
      out += "NULL";
      continue;
    }
    out.push_back('"');
    for (char ch : *items[i]) {
      if (ch == '"' || ch == '\\') out.push_back('\\');
      out.push_back(ch);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

template <typename F>
std::string ColumnOf(std::span<const EnqueueRequest> requests, F value) {
  std::vector<std::optional<std::string>> items;
  items.reserve(requests.size());
  for (const EnqueueRequest& r : requests) items.push_back(value(r));
  return ArrayLiteral(items);
}

template <typename T>
std::optional<std::string> Number(const std::optional<T>& v) {
  return v ? std::optional(std::to_string(*v)) : std::nullopt;
}

// The arguments of delayq._put_many for requests without a key: one array per column, the payloads
// as one bytea cut by their lengths.
std::vector<Param> PutManyParams(const std::string& queue, std::span<const std::string> ids,
                                 std::span<const EnqueueRequest> rs) {
  std::string payloads;
  for (const EnqueueRequest& r : rs) payloads += r.payload;
  size_t i = 0;
  return {
      Param::Of(queue),
      Param::Of(ColumnOf(rs, [&](const EnqueueRequest&) { return std::optional(ids[i++]); })),
      Param::Bytes(std::move(payloads)),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return std::optional(std::to_string(r.payload.size())); })),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return std::optional<std::string>(r.binary ? "t" : "f"); })),
      Param::Of(ColumnOf(rs,
                         [](const EnqueueRequest& r) {
                           Param h = HeadersParam(r.headers);
                           return h.null ? std::nullopt : std::optional(std::move(h.value));
                         })),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return Number(r.when.delay_ms); })),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return Number(r.when.deliver_at_ms); })),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return Number(r.max_attempts); })),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return std::optional(std::to_string(r.key_ttl_ms)); })),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return std::optional(std::to_string(r.priority)); })),
      Param::Of(ColumnOf(rs, [](const EnqueueRequest& r) { return std::optional(r.group); }))};
}

constexpr const char* kPutMany =
    "SELECT id, due_at_ms FROM delayq._put_many($1, $2::text[], $3, $4::int[], $5::boolean[], $6::text[], "
    "$7::bigint[], $8::bigint[], $9::int[], $10::bigint[], $11::int[], $12::text[])";

bool AnyKey(std::span<const EnqueueRequest> requests) {
  return std::any_of(requests.begin(), requests.end(), [](const EnqueueRequest& r) { return !r.key.empty(); });
}

// The rules of every request against `config`, naming jobs[i] in a batch. Judged again by
// delayq._put on the database's clock; here on this host's, so that a job far too late is refused
// before its queue is made.
Status ValidateRequests(std::span<const EnqueueRequest> requests, const QueueConfig& config, int64_t now) {
  const bool batch = requests.size() > 1;
  auto prefix = [batch](size_t i) { return batch ? fmt::format("jobs[{}].", i) : std::string(); };
  for (size_t i = 0; i < requests.size(); ++i) {
    DELAYQ_RETURN_IF_ERROR(ValidateEnqueue(requests[i], config, prefix(i)));
    DELAYQ_RETURN_IF_ERROR(ValidateText(requests[i], prefix(i)));
    DELAYQ_RETURN_IF_ERROR(ResolveDue(requests[i].when, now, config, prefix(i)).status());
  }
  return Status::Ok();
}

constexpr const char* kPut =
    "SELECT id, due_at_ms, duplicate, replaced FROM delayq._put($1, $2, $3, $4, $5::json, $6, $7, $8, $9, $10, $11, "
    "$12, $13, false)";

}  // namespace

Result<EnqueueResult> PostgresQueue::Enqueue(std::string_view queue, const EnqueueRequest& request) {
  auto r = EnqueueBatch(queue, std::span(&request, 1));
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

// Validation and ids first (nothing is written when a request is invalid), then one transaction:
// a batch is all or nothing. A key given twice in one batch names the job its first request made.
Result<std::vector<EnqueueResult>> PostgresQueue::EnqueueBatch(std::string_view queue_view,
                                                               std::span<const EnqueueRequest> requests) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  DELAYQ_RETURN_IF_ERROR(ValidateBatchSize(requests.size()));
  const std::string queue(queue_view);
  const bool batch = requests.size() > 1;
  auto prefix = [batch](size_t i) { return batch ? fmt::format("jobs[{}].", i) : std::string(); };
  auto known = ConfigOf(queue);
  if (!known.ok() && known.code() != Code::kNotFound) return known.status();
  QueueConfig config = known.ok() ? *known : QueueConfig{};
  const int64_t now = SystemClock::Instance()->NowMs();
  if (Status s = ValidateRequests(requests, config, now); !s.ok()) {
    // The config may be a second old and another server may have raised the limit since: a
    // refusal is judged again on the database's config before it is given.
    if (!known.ok()) return s;
    ForgetConfig(queue);
    known = ConfigOf(queue);
    if (!known.ok()) return known.code() == Code::kNotFound ? s : known.status();
    config = *known;
    DELAYQ_RETURN_IF_ERROR(ValidateRequests(requests, config, now));
  }
  std::vector<std::string> ids(requests.size());
  {
    std::lock_guard lock(mu_);
    for (auto& id : ids) id = ids_.Next(now).ToString();
  }
  auto c = Borrow();
  if (!c.ok()) return c.status();
  std::vector<EnqueueResult> results(requests.size());
  std::map<std::string_view, size_t> first_of_key;
  int64_t added = 0;
  Status s = InTransaction(**c, [&]() -> Status {
    int64_t wake = Clock::kNever;
    if (batch && !AnyKey(requests)) {  // one statement; no row back: a limit broken, said by the loop below
      auto rows = (*c)->Exec(kPutMany, PutManyParams(queue, ids, requests));
      if (!rows.ok()) return rows.status();
      if (rows->size() == static_cast<int>(requests.size())) {
        std::map<std::string_view, size_t> at;  // RETURNING's order is not promised: by id
        for (size_t i = 0; i < ids.size(); ++i) at.emplace(ids[i], i);
        for (int row = 0; row < rows->size(); ++row) {
          EnqueueResult& e = results[at.at(rows->Text(row, 0))];
          e = {rows->Str(row, 0), rows->Int(row, 1), false, false};
          wake = std::min(wake, e.due_at_ms);
        }
        added = static_cast<int64_t>(requests.size());
        return (*c)->Exec("SELECT delayq._wake($1, $2, delayq.now_ms())", {Param::Of(queue), Param::Of(wake)}).status();
      }
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      const EnqueueRequest& r = requests[i];
      if (!r.key.empty()) {
        auto [it, fresh] = first_of_key.emplace(r.key, i);
        if (!fresh) {
          results[i] = {results[it->second].id, results[it->second].due_at_ms, true, false};
          continue;
        }
      }
      auto row = (*c)->Exec(kPut, PutParams(queue, ids[i], r));
      if (!row.ok()) {
        const ServerError& e = (*c)->last_error();
        if (e.sqlstate == "DQ409") return errors::ReservedCannotReplace(prefix(i), r.key, e.detail);
        if (e.sqlstate == "22023" && e.detail.rfind("TOO_FAR:", 0) == 0) {
          auto due = ResolveDue(r.when, std::atoll(e.detail.c_str() + 8), config, prefix(i));
          if (!due.ok()) return due.status();
        }
        // A limit judged by the database (a config changed by another server meanwhile) names the job.
        if (batch && (e.sqlstate == "DQ413" || e.sqlstate == "22023")) {
          return Status(row.status().code(), prefix(i) + row.status().message());
        }
        return row.status();
      }
      results[i] = {row->Str(0, 0), row->Int(0, 1), row->Bool(0, 2), row->Bool(0, 3)};
      if (!results[i].duplicate) ++added;
      if (!results[i].duplicate || results[i].replaced) wake = std::min(wake, results[i].due_at_ms);
    }
    if (wake == Clock::kNever) return Status::Ok();
    return (*c)->Exec("SELECT delayq._wake($1, $2, delayq.now_ms())", {Param::Of(queue), Param::Of(wake)}).status();
  });
  if (!s.ok()) return s;
  std::lock_guard lock(mu_);
  MetricsLocked(queue).counters.enqueued += static_cast<uint64_t>(added);
  return results;
}

Result<Job> PostgresQueue::GetById(const std::string& queue, const std::string& id) {
  auto r =
      Exec(std::string("SELECT ") + kJobColumns + ", delayq.now_ms() FROM delayq.jobs WHERE queue = $1 AND id = $2",
           {Param::Of(queue), Param::Of(id)});
  if (!r.ok()) return r.status();
  if (r->empty()) {  // a completed job, or none
    r = Exec(std::string("SELECT ") + kCompletedColumns +
                 ", delayq.now_ms() FROM delayq.completed WHERE queue = $1 AND id = $2",
             {Param::Of(queue), Param::Of(id)});
    if (!r.ok()) return r.status();
  }
  if (r->empty()) return errors::NoSuchJob(queue, id);
  return JobFromRow(queue, *r, 0, r->Int(0, kJobColumnCount));
}

Result<Job> PostgresQueue::Get(std::string_view queue_view, const JobRef& ref) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  DELAYQ_RETURN_IF_ERROR(ValidateJobRef(ref));
  if (!ref.id.empty()) {
    auto id = Ulid::Parse(ref.id);
    if (!id) return errors::NotAJobId("id", ref.id);
    return GetById(queue, id->ToString());
  }
  DELAYQ_RETURN_IF_ERROR(ValidateKey(ref.key));
  auto r = Exec(std::string("SELECT ") + kJobColumns +
                    ", delayq.now_ms() FROM delayq.jobs WHERE queue = $1 AND key = $2 AND state <> 'd'",
                {Param::Of(queue), Param::Of(ref.key)});
  if (!r.ok()) return r.status();
  if (r->empty()) {  // a completed job while its kept key names it, or none
    r = Exec(std::string("SELECT ") + kCompletedColumns +
                 ", delayq.now_ms() FROM delayq.completed c WHERE c.queue = $1 AND c.id = (SELECT k.id FROM "
                 "delayq.kept_keys k WHERE k.queue = $1 AND k.key = $2 AND k.until_ms > delayq.now_ms())",
             {Param::Of(queue), Param::Of(ref.key)});
    if (!r.ok()) return r.status();
  }
  if (r->empty()) return errors::NoJobWithKey(queue, ref.key);
  return JobFromRow(queue, *r, 0, r->Int(0, kJobColumnCount));
}

uint64_t PostgresQueue::WaitOutcomeAsync(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) {
  return outcomes_.Wait(queue, ref, wait_ms, std::move(done));
}

// Notes that someone here waits for the job's outcome (delayq._watch, v6_1_outcomes.sql).
Status PostgresQueue::Watch(std::string_view queue, std::string_view id, int64_t wait_ms) {
  return Exec("SELECT delayq._watch($1, $2, $3)",
              {Param::Of(std::string(queue)), Param::Of(std::string(id)), Param::Of(wait_ms)})
      .status();
}

Status PostgresQueue::Cancel(std::string_view queue_view, const JobRef& ref) {
  auto job = Get(queue_view, ref);  // the clear errors: no queue, not an id, no such job
  if (!job.ok()) return job.status();
  const std::string queue(queue_view);
  if (job->state == JobState::kCompleted) {
    auto r = Exec("DELETE FROM delayq.completed WHERE queue = $1 AND id = $2", {Param::Of(queue), Param::Of(job->id)});
    return r.ok() ? Status::Ok() : r.status();
  }
  auto r = Exec("SELECT delayq._cancel($1, $2, NULL)", {Param::Of(queue), Param::Of(job->id)});
  if (!r.ok()) return r.status();
  const std::string_view outcome = r->Text(0, 0);
  if (outcome == "N") return errors::NoSuchJob(queue, job->id);
  if (outcome != "O") return errors::ReservedCannotCancel(job->id);
  return Status::Ok();
}

Result<Job> PostgresQueue::Reschedule(std::string_view queue_view, const JobRef& ref, const When& when) {
  auto job = Get(queue_view, ref);
  if (!job.ok()) return job.status();
  if (job->state == JobState::kCompleted) return errors::CompletedCannotReschedule(job->id);
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  DELAYQ_RETURN_IF_ERROR(ValidateWhen(when, *config));  // a deliver_at: _reschedule, on the database's clock
  auto r = Exec(
      "SELECT outcome, id, due_at_ms FROM delayq._reschedule($1, $2, NULL, $3, $4, true)",
      {Param::Of(queue), Param::Of(job->id), when.deliver_at_ms ? Param::Null() : Param::Of(when.delay_ms.value_or(0)),
       Param::Maybe(when.deliver_at_ms)});
  if (!r.ok()) return r.status();
  const std::string_view outcome = r->Text(0, 0);
  if (outcome == "N") return errors::NoSuchJob(queue, job->id);
  if (outcome == "R") return errors::ReservedCannotReschedule(job->id);
  if (outcome == "D") return errors::DeadCannotReschedule(job->id);
  if (outcome == "F") {  // too far ahead: the refusal ResolveDue gives, at the database's now
    auto due = ResolveDue(when, r->Int(0, 2), *config);
    if (!due.ok()) return due.status();
  }
  return GetById(queue, job->id);
}

}  // namespace delayq::postgres
