// Jobs on the Redis store: enqueue (one or a batch), get, cancel, reschedule. The twin of the
// embedded store's engine_jobs.cc; the transitions themselves are the enqueue, get, cancel and
// reschedule scripts.
#include <fmt/format.h>

#include "core/errors.h"
#include "core/record.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_meta.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {
namespace {

// One shard's part of an enqueue: which requests of the batch it holds and the enqueue script's
// arguments for them.
struct ShardPlan {
  int shard = 0;
  std::vector<size_t> members;
  std::vector<std::string> args;
  bool any_now = false;  // a job due at once: waiting reserves should look
};

// The arguments of each shard's script: the records (the codec every store shares) and how each
// due time is given (the script turns it into a date on Redis' clock).
std::vector<ShardPlan> PlanEnqueue(const std::string& queue, const QueueConfig& config,
                                   std::span<const EnqueueRequest> requests, const std::vector<Ulid>& ids,
                                   const std::vector<int>& shard_of, int shards, int64_t now_ms) {
  std::vector<ShardPlan> plans(static_cast<size_t>(shards));
  for (int s = 0; s < shards; ++s) {
    plans[static_cast<size_t>(s)].shard = s;
    plans[static_cast<size_t>(s)].args = {std::to_string(config.max_delay_ms), "0"};
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const EnqueueRequest& r = requests[i];
    ShardPlan& plan = plans[static_cast<size_t>(shard_of[i])];
    JobRecord record = NewJobRecord(queue, r, config, now_ms);
    // Not kept twice: the queue is the record's key's, and the key is in the job's meta (every
    // reader takes both from there: ToJob, DecodeDelivery). A job costs their bytes less
    // (docs/performance.md, "The Redis store's bytes per job").
    record.queue.clear();
    record.key.clear();
    plan.members.push_back(i);
    plan.args.push_back(ids[i].ToString());
    plan.args.push_back(EncodeJobRecord(record));
    if (r.when.delay_ms) {
      plan.args.insert(plan.args.end(), {"d", std::to_string(*r.when.delay_ms)});
    } else if (r.when.deliver_at_ms) {
      plan.args.insert(plan.args.end(), {"a", std::to_string(*r.when.deliver_at_ms)});
    } else {
      plan.args.insert(plan.args.end(), {"n", "0"});
      plan.any_now = true;
    }
    plan.args.push_back(std::to_string(r.max_attempts.value_or(config.max_attempts)));
    plan.args.push_back(r.key);
    plan.args.push_back(r.debounce ? "2" : r.replace ? "1" : "0");  // the script's replace field
    plan.args.push_back(std::to_string(r.key_ttl_ms));
    plan.args.push_back(std::to_string(r.priority));
    plan.args.push_back(r.group);
  }
  std::erase_if(plans, [](const ShardPlan& p) { return p.members.empty(); });
  for (ShardPlan& p : plans) p.args[1] = std::to_string(p.members.size());
  return plans;
}

// The enqueue script's refusal, in the words every store uses: "delayq:TOO_FAR:<i>:<now>" (a
// deliver_at past max_delay_ms at Redis' now) or "delayq:CONFLICT:<i>:<id>" (replacing a reserved
// job), with i the request's place in this shard's part.
Status EnqueueRefusal(const Value& v, const ShardPlan& plan, std::span<const EnqueueRequest> requests,
                      const QueueConfig& config, const std::function<std::string(size_t)>& prefix) {
  const std::string& e = v.str;
  const auto at = e.find("delayq:");
  if (at == std::string::npos) return ScriptError(v);
  const std::string rest = e.substr(at + 7);
  const auto c1 = rest.find(':'), c2 = rest.find(':', c1 + 1);
  if (c1 == std::string::npos || c2 == std::string::npos) return ScriptError(v);
  const std::string kind = rest.substr(0, c1), detail = rest.substr(c2 + 1);
  const auto local = static_cast<size_t>(std::atoi(rest.c_str() + c1 + 1));
  const size_t index = local < plan.members.size() ? plan.members[local] : 0;
  if (kind == "CONFLICT") return errors::ReservedCannotReplace(prefix(index), requests[index].key, detail);
  if (kind == "TOO_FAR") {
    auto due = ResolveDue(requests[index].when, std::atoll(detail.c_str()), config, prefix(index));
    if (!due.ok()) return due.status();
  }
  return ScriptError(v);
}

// One shard's answer to its part of the batch, into `results` (the requests' places).
Status ReadEnqueueAnswer(const Value& v, const ShardPlan& plan, std::span<const EnqueueRequest> requests,
                         const QueueConfig& config, const std::function<std::string(size_t)>& prefix,
                         std::vector<EnqueueResult>& results) {
  if (v.is_error()) return EnqueueRefusal(v, plan, requests, config, prefix);
  for (size_t j = 0; j < plan.members.size() && j < v.array.size(); ++j) {
    const auto& row = v.array[j].array;
    if (row.size() < 4) return Status::Internal("the enqueue script answered a short row");
    EnqueueResult& out = results[plan.members[j]];
    out.id = row[0].str;
    out.due_at_ms = row[1].AsInt();
    out.duplicate = row[2].AsInt() == 1;
    out.replaced = row[3].AsInt() == 1;
  }
  return Status::Ok();
}

// Every shard's answer to its part, into `results`; `any_now` when a part that may be stored made
// jobs ready. A part Redis could not serve (it may have written) outranks a refusal; the parts
// stored stand, and the error says so.
Status ReadEnqueueAnswers(std::vector<Result<Value>>& answers, const std::vector<ShardPlan>& plans,
                          std::span<const EnqueueRequest> requests, const QueueConfig& config, int shards,
                          const std::function<std::string(size_t)>& prefix, std::vector<EnqueueResult>& results,
                          bool& any_now) {
  Status failed = Status::Ok();
  size_t stored = 0;
  for (size_t p = 0; p < plans.size(); ++p) {
    Status read = answers[p].ok() ? ReadEnqueueAnswer(*answers[p], plans[p], requests, config, prefix, results)
                                  : answers[p].status();
    if (read.ok()) stored += plans[p].members.size();
    if (read.ok() || read.code() == Code::kUnavailable) any_now = any_now || plans[p].any_now;
    if (!read.ok() && (failed.ok() || (read.code() == Code::kUnavailable && failed.code() != Code::kUnavailable))) {
      failed = read;
    }
  }
  if (failed.ok() || stored == 0) return failed;
  return Status(failed.code(), fmt::format("{} (this queue is split over {} shards, each part stored whole or not at "
                                           "all: the parts of {} of the {} jobs were stored; send only the others "
                                           "again, or give jobs keys so that a retry is a duplicate)",
                                           failed.message(), shards, stored, requests.size()));
}

}  // namespace

Result<EnqueueResult> RedisQueue::Enqueue(std::string_view queue, const EnqueueRequest& request) {
  auto r = EnqueueBatch(queue, std::span(&request, 1));
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

// Validation and ids first (nothing is written when a request is invalid), then one script per
// shard, all sent before any answer is read (RunAll). A batch spread over several shards is all
// or nothing per shard: a refusal that only Redis can see (a reserved job to replace, a
// deliver_at past max_delay_ms on Redis' clock) in one shard's part leaves the other shards'
// parts stored.
Result<std::vector<EnqueueResult>> RedisQueue::EnqueueBatch(std::string_view queue_view,
                                                            std::span<const EnqueueRequest> requests) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  DELAYQ_RETURN_IF_ERROR(ValidateBatchSize(requests.size()));
  const bool batch = requests.size() > 1;
  const std::function<std::string(size_t)> prefix = [batch](size_t i) {
    return batch ? fmt::format("jobs[{}].", i) : std::string();
  };
  // Refused before anything is made: a request the queue's config (or, for a queue not made
  // yet, the default config) refuses creates no queue.
  auto info = Info(queue_view, false);
  if (!info.ok() && info.code() != Code::kNotFound) return info.status();
  const QueueConfig& config = info.ok() ? info->config : options_.default_queue_config;
  const int64_t local_now = WallMs();
  for (size_t i = 0; i < requests.size(); ++i) {
    DELAYQ_RETURN_IF_ERROR(ValidateEnqueue(requests[i], config, prefix(i)));
    // A deliver_at is judged again by the script, on Redis' clock; here on this host's, so that
    // one far too late is refused before its queue is made.
    DELAYQ_RETURN_IF_ERROR(ResolveDue(requests[i].when, local_now, config, prefix(i)).status());
  }
  if (!info.ok()) info = Info(queue_view, true);
  if (!info.ok()) return info.status();
  const QueueView& q = *info;
  // A job with a key goes to its key's shard (so a key is unique per queue), with an id whose
  // last byte names that shard; the others to their id's shard.
  std::vector<Ulid> ids(requests.size());
  std::vector<int> shard_of(requests.size());
  const int64_t now = WallMs();
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < requests.size(); ++i) {
      const int want = requests[i].key.empty() ? -1 : q.ShardOfKey(requests[i].key);
      do {
        ids[i] = ids_.Next(now);
      } while (want >= 0 && q.ShardOfId(ids[i]) != want);
      shard_of[i] = q.ShardOfId(ids[i]);
    }
  }
  std::vector<EnqueueResult> results(requests.size());
  bool any_now = false;
  const std::vector<ShardPlan> plans = PlanEnqueue(q.name, q.config, requests, ids, shard_of, q.shards, now);
  std::vector<std::pair<int, std::vector<std::string>>> shard_args;
  for (const ShardPlan& plan : plans) shard_args.emplace_back(plan.shard, plan.args);
  delivery_first_.BeforeEnqueue();
  auto answers = RunAll(kEnqueueScript, q, shard_args, true);  // the shards' parts at once
  Status read = ReadEnqueueAnswers(answers, plans, requests, q.config, q.shards, prefix, results, any_now);
  if (any_now) NoteReady(q.name);
  if (!read.ok()) return read;
  return results;
}

Result<Job> RedisQueue::ToJob(const std::string& queue, const Value& v) {
  if (v.is_nil() || v.array.size() < 7) return Status::Internal("the get script answered a short row");
  auto meta = ParseMeta(v.array[1].str);
  if (!meta.ok()) return meta.status();
  JobRecord record;
  if (!v.array[2].str.empty()) DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(v.array[2].str, &record));
  Job j;
  j.id = v.array[0].str;
  j.queue = queue;
  j.due_at_ms = meta->due;
  j.attempt = meta->attempt;
  j.max_attempts = meta->max;
  j.key = meta->key;
  j.payload = std::move(record.payload);
  j.binary = record.binary;
  j.headers = std::move(record.headers);
  j.created_at_ms = record.created_at_ms;
  j.last_error = v.array[3].str;
  j.priority = meta->priority;
  j.group = meta->group;
  const int64_t now = v.array[6].AsInt();
  switch (meta->state) {
    case 'q': j.state = JobState::kReady; break;
    case 'r': {
      j.lease_deadline_ms = v.array[4].AsInt();
      j.state = j.lease_deadline_ms > now ? JobState::kReserved : JobState::kReady;
      // dq:{q}:progress holds "delivery|json": only the current delivery's is shown.
      const std::string_view progress = v.array.size() > 7 ? std::string_view(v.array[7].str) : "";
      if (j.state == JobState::kReserved && progress.size() > meta->delivery.size() + 1 &&
          progress.starts_with(meta->delivery) && progress[meta->delivery.size()] == '|') {
        j.progress = progress.substr(meta->delivery.size() + 1);
      }
      break;
    }
    case 'd':
      j.state = JobState::kDead;
      j.dead_at_ms = v.array[5].AsInt();
      break;
    case 'c':  // a completed job kept: its row has completed_at and result after the progress
      if (v.array.size() < 10) return Status::Internal("the get script answered a short completed row");
      j.state = JobState::kCompleted;
      j.completed_at_ms = v.array[8].AsInt();
      j.result = v.array[9].str;
      break;
    default: j.state = JobState::kScheduled;
  }
  return j;
}

Result<Job> RedisQueue::Get(std::string_view queue_view, const JobRef& ref) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  DELAYQ_RETURN_IF_ERROR(ValidateJobRef(ref));
  int shard = 0;
  if (!ref.id.empty()) {
    auto id = Ulid::Parse(ref.id);
    if (!id) return errors::NotAJobId("id", ref.id);
    shard = info->ShardOfId(*id);
  } else {
    DELAYQ_RETURN_IF_ERROR(ValidateKey(ref.key));
    shard = info->ShardOfKey(ref.key);
  }
  auto v = Run(kGetScript, *info, shard, {ref.id, ref.key});
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->is_nil())
    return ref.id.empty() ? errors::NoJobWithKey(info->name, ref.key) : errors::NoSuchJob(info->name, ref.id);
  return ToJob(info->name, *v);
}

uint64_t RedisQueue::WaitOutcomeAsync(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) {
  return outcomes_.Wait(queue, ref, wait_ms, std::move(done));
}

// Notes in the job's shard that someone waits for its outcome (watch.lua).
Status RedisQueue::Watch(std::string_view queue, std::string_view id, int64_t wait_ms) {
  auto info = Info(queue, false);
  if (!info.ok()) return info.status();
  auto parsed = Ulid::Parse(id);
  if (!parsed) return errors::NotAJobId("id", id);
  auto v = Run(kWatchScript, *info, info->ShardOfId(*parsed), {std::string(id), std::to_string(wait_ms)});
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  return Status::Ok();
}

Status RedisQueue::Cancel(std::string_view queue, const JobRef& ref) {
  auto job = Get(queue, ref);  // resolves the shard and gives the clear errors
  if (!job.ok()) return job.status();
  auto info = Info(queue, false);
  if (!info.ok()) return info.status();
  auto v = Run(kCancelScript, *info, info->ShardOfId(*Ulid::Parse(job->id)), {job->id, ""}, true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->str == "N") return errors::NoSuchJob(info->name, job->id);
  if (v->str == "C") return errors::ReservedCannotCancel(job->id);
  return Status::Ok();
}

Result<Job> RedisQueue::Reschedule(std::string_view queue, const JobRef& ref, const When& when) {
  auto job = Get(queue, ref);
  if (!job.ok()) return job.status();
  if (job->state == JobState::kCompleted) return errors::CompletedCannotReschedule(job->id);
  auto info = Info(queue, false);
  if (!info.ok()) return info.status();
  DELAYQ_RETURN_IF_ERROR(ValidateWhen(when, info->config));  // a deliver_at: the script, on Redis' clock
  std::string mode = "d", value = "0";
  if (when.delay_ms) value = std::to_string(*when.delay_ms);
  if (when.deliver_at_ms) {
    mode = "a";
    value = std::to_string(*when.deliver_at_ms);
  }
  auto v = Run(kRescheduleScript, *info, info->ShardOfId(*Ulid::Parse(job->id)),
               {job->id, "", mode, value, std::to_string(info->config.max_delay_ms)}, true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->type != Value::kArray) {
    if (v->str == "N") return errors::NoSuchJob(info->name, job->id);
    if (v->str == "C") return errors::ReservedCannotReschedule(job->id);
    if (v->str == "D") return errors::DeadCannotReschedule(job->id);
    if (v->str == "K") return errors::CompletedCannotReschedule(job->id);
    if (v->str.rfind("I:", 0) == 0) {  // too far ahead: the refusal ResolveDue gives, at Redis' now
      auto due = ResolveDue(when, std::atoll(v->str.c_str() + 2), info->config);
      if (!due.ok()) return due.status();
    }
    return Status::Internal("the reschedule script answered " + v->str.substr(0, 40));
  }
  NoteReady(info->name);
  return Get(queue, JobRef::ById(job->id));
}

}  // namespace delayq::redis
