// Jobs on the embedded store: enqueue (one or a batch, planned and then applied), get, cancel,
// reschedule, and the keys they hold (kept after a job is done with key_ttl_ms). The Redis
// store's twin is redis_jobs.cc.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/errors.h"
#include "core/validate.h"
#include "store/embedded/engine_impl.h"

namespace delayq {

Result<EnqueueResult> EngineImpl::Enqueue(std::string_view queue, const EnqueueRequest& request) {
  auto r = EnqueueImpl(queue, std::span(&request, 1), false);
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

Result<std::vector<EnqueueResult>> EngineImpl::EnqueueBatch(std::string_view queue,
                                                            std::span<const EnqueueRequest> requests) {
  return EnqueueImpl(queue, requests, true);
}

Result<std::vector<EnqueueResult>> EngineImpl::EnqueueImpl(std::string_view queue,
                                                           std::span<const EnqueueRequest> requests, bool is_batch) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateBatchSize(requests.size()));
  Op op(*this, Op::kWrites);
  auto results = EnqueueLocked(op, queue, requests, is_batch);
  if (!results.ok()) return results.status();
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return results;
}

void EngineImpl::EnqueueAsync(std::string_view queue, const EnqueueRequest& request, EnqueueOneCallback done) {
  EnqueueAsyncImpl(queue, std::span(&request, 1), false,
                   [done = std::move(done)](Result<std::vector<EnqueueResult>> r) {
                     if (!r.ok()) return done(r.status());
                     done(std::move(r->front()));
                   });
}

void EngineImpl::EnqueueBatchAsync(std::string_view queue, std::span<const EnqueueRequest> requests,
                                   EnqueueCallback done) {
  EnqueueAsyncImpl(queue, requests, true, std::move(done));
}

void EngineImpl::EnqueueAsyncImpl(std::string_view queue, std::span<const EnqueueRequest> requests, bool is_batch,
                                  EnqueueCallback done) {
  Status valid = ValidateQueueName(queue);
  if (valid.ok()) valid = ValidateBatchSize(requests.size());
  if (!valid.ok()) return done(valid);
  Op op(*this, Op::kWrites);
  auto results = EnqueueLocked(op, queue, requests, is_batch);
  if (!results.ok()) {
    op.Unlock();
    return done(results.status());
  }
  op.FinishAsync([done = std::move(done), results = std::move(*results)](Status durable) mutable {
    if (!durable.ok()) return done(durable);
    done(std::move(results));
  });
}

Result<std::vector<EnqueueResult>> EngineImpl::EnqueueLocked(Op& op, std::string_view queue,
                                                             std::span<const EnqueueRequest> requests, bool is_batch) {
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  if (!q) DELAYQ_RETURN_IF_ERROR(RoomForQueueLocked(queue));
  auto plan =
      PlanEnqueueLocked(queue, q ? ConfigOf(q) : options_.default_queue_config, requests, is_batch, op.now().wall_ms());
  if (!plan.ok()) return plan.status();
  if (plan->batch->Count() > 0) DELAYQ_RETURN_IF_ERROR(op.Write(*plan->batch));
  if (!q) q = GetOrCreateQueueLocked(queue);
  ApplyEnqueueLocked(q, *plan, op.now());
  ServeWaitersLocked(q, op.now(), op.deferred());
  return std::move(plan->results);
}

// Reads what the requests need (their keys' jobs) and plans one batch: validated, with each job's
// due time on this store's clock; nothing is written and memory is untouched. A key given twice
// in the batch: the first request wins and the others answer its job as a duplicate.
// A request whose key names a job: a duplicate of it (or of a finished job whose key is still
// kept), or its replace or debounce. True when the request is answered so; false when the key is
// free (a new job takes it).
Result<bool> EngineImpl::PlanTakenKeyLocked(std::string_view queue, const EnqueueRequest& r, const std::string& idem,
                                            int64_t due_ms, int64_t now_ms, bool is_batch, size_t i,
                                            EnqueuePlan& plan) {
  std::string existing;
  Status s = storage_->Get(Cf::kKeys, idem, &existing);
  if (s.code() == Code::kNotFound) return false;
  DELAYQ_RETURN_IF_ERROR(s);
  if (KeptKey kept; DecodeKeptKey(existing, &kept)) {
    // Done, and its key still kept: a duplicate of the finished job, even with replace (the Lua
    // twin is lua/enqueue.lua). Once free, the new job overwrites it.
    if (kept.expiry_ms <= now_ms) return false;
    plan.results[i] = {kept.id.ToString(), kept.due_ms, true, false};
    return true;
  }
  const Ulid id = Ulid::FromRaw(existing);
  JobRecord record;
  s = ReadRecord(*storage_, queue, id, nullptr, &record);
  if (s.code() == Code::kNotFound) return false;
  DELAYQ_RETURN_IF_ERROR(s);
  if (!r.replace && !r.debounce) {
    plan.results[i] = {id.ToString(), record.due_at_ms, true, false};
    return true;
  }
  if (leases_.contains(id)) {
    return errors::ReservedCannotReplace(is_batch ? fmt::format("jobs[{}].", i) : std::string(), r.key, id.ToString());
  }
  DueKey old_key{record.due_at_ms, id};
  std::string due_raw;
  DELAYQ_RETURN_IF_ERROR(storage_->Get(Cf::kDue, DueIndexKey(queue, old_key), &due_raw));
  // A debounce never moves the job earlier (the Lua twin is lua/enqueue.lua).
  const int64_t due = r.debounce ? std::max(record.due_at_ms, due_ms) : due_ms;
  // Replaced: new content in the old job's place, so its attempts start again. Its record goes to
  // `jobs` (it may leave its id's place).
  ApplyReplace(record, r, due);
  DueKey key{due, id};
  plan.batch->Put(Cf::kJobs, id.Raw(), EncodeJobRecord(record));
  plan.batch->Delete(Cf::kDue, DueIndexKey(queue, old_key));
  DueRecord entry{key.due_ms, 0, {}, 0};
  entry.priority = record.priority;
  entry.group = record.group;
  plan.batch->Put(Cf::kDue, DueIndexKey(queue, key), EncodeDueRecord(entry));
  plan.placements.push_back({old_key, key, true, Lane{r.priority, r.group}});
  plan.results[i] = {id.ToString(), due, true, true};
  return true;
}

Result<EnqueuePlan> EngineImpl::PlanEnqueueLocked(std::string_view queue, const QueueConfig& config,
                                                  std::span<const EnqueueRequest> requests, bool is_batch,
                                                  int64_t now_ms) {
  // A message names the batch entry ("jobs[3].key ..."): built only for the entry that fails, as
  // formatting it for every job took ~3 % of an enqueue (docs/performance.md).
  auto prefix = [is_batch](size_t i) { return is_batch ? fmt::format("jobs[{}].", i) : std::string(); };
  std::vector<int64_t> dues(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!ValidateEnqueue(requests[i], config, "").ok()) {
      return ValidateEnqueue(requests[i], config, prefix(i));
    }
    auto due = ResolveDue(requests[i].when, now_ms, config, "");
    if (!due.ok()) return ResolveDue(requests[i].when, now_ms, config, prefix(i)).status();
    dues[i] = *due;
  }
  EnqueuePlan plan;
  plan.batch = storage_->NewBatch();
  plan.results.resize(requests.size());
  WriteBatch& batch = *plan.batch;
  std::unordered_map<std::string_view, size_t> batch_keys;  // key -> first request using it
  for (size_t i = 0; i < requests.size(); ++i) {
    const EnqueueRequest& r = requests[i];
    std::string idem;
    if (!r.key.empty()) {
      if (auto it = batch_keys.find(r.key); it != batch_keys.end()) {
        plan.results[i] = plan.results[it->second];
        plan.results[i].duplicate = true;
        plan.results[i].replaced = false;
        continue;
      }
      batch_keys.emplace(r.key, i);
      idem = IdemKey(queue, r.key);
      auto taken = PlanTakenKeyLocked(queue, r, idem, dues[i], now_ms, is_batch, i, plan);
      if (!taken.ok()) return taken.status();
      if (*taken) continue;
    }
    Ulid id = ids_.NextTagged(now_ms, BucketTag(dues[i]));
    JobRecord record = NewJobRecord(queue, r, config, now_ms);
    record.key_indexed = !r.key.empty();
    record.due_at_ms = dues[i];
    DueKey key{dues[i], id};
    PutNewJob(batch, queue, key, record);
    if (!idem.empty()) batch.Put(Cf::kKeys, idem, id.Raw());
    plan.placements.push_back({{}, key, false, Lane{r.priority, r.group}});
    plan.results[i] = {id.ToString(), dues[i], false, false};
  }
  return plan;
}

// Once the plan's batch is written: the new jobs and the replaced ones in their new places.
void EngineImpl::ApplyEnqueueLocked(QueueState* q, const EnqueuePlan& plan, const Instant& now) {
  for (const EnqueuePlan::Placement& p : plan.placements) {
    if (p.replaced) {
      UnplaceLocked(q, p.old_key);
    } else {
      ++q->live;
      ++q->counters.enqueued;
    }
    PlaceLocked(q, p.key, 0, {}, false, now.wall_us, p.lane);
  }
}

// The job `ref` names in `q` and its record (*in_due: where it was, see ReadRecord).
Status EngineImpl::ResolveRefLocked(QueueState* q, const JobRef& ref, Ulid* id, JobRecord* record, bool* in_due) {
  std::string raw;
  if (!ref.id.empty()) {
    auto parsed = Ulid::Parse(ref.id);
    if (!parsed) return errors::NotAJobId("id", ref.id);
    *id = *parsed;
  } else {
    DELAYQ_RETURN_IF_ERROR(ValidateKey(ref.key));
    if (ref.key.empty()) return Status::InvalidArgument("give a job id or a key");
    Status s = storage_->Get(Cf::kKeys, IdemKey(q->name, ref.key), &raw);
    if (s.code() == Code::kNotFound) return errors::NoJobWithKey(q->name, ref.key);
    DELAYQ_RETURN_IF_ERROR(s);
    if (raw.size() != 16) return errors::NoJobWithKey(q->name, ref.key);  // kept after its job was done
    *id = Ulid::FromRaw(raw);
  }
  Status s = ReadRecord(*storage_, q->name, *id, nullptr, record, in_due);
  if (s.code() == Code::kNotFound) return errors::NoSuchJob(q->name, id->ToString());
  DELAYQ_RETURN_IF_ERROR(s);
  // A job of another queue does not exist in this one (the Redis store cannot tell either).
  if (record->queue != q->name) return errors::NoSuchJob(q->name, id->ToString());
  return Status::Ok();
}

Result<Job> EngineImpl::JobViewLocked(QueueState* q, const Ulid& id, const JobRecord& record) {
  Job job;
  job.id = id.ToString();
  job.queue = record.queue;
  job.due_at_ms = record.due_at_ms;
  job.max_attempts = record.max_attempts;
  job.key = record.key;
  job.payload = record.payload;
  job.binary = record.binary;
  job.headers = record.headers;
  job.created_at_ms = record.created_at_ms;
  job.last_error = record.last_error;
  job.priority = record.priority;
  job.group = record.group;
  if (record.dead) {
    job.state = JobState::kDead;
    job.attempt = record.attempt;
    job.dead_at_ms = record.dead_at_ms;
    return job;
  }
  if (record.completed) {
    job.state = JobState::kCompleted;
    job.attempt = record.attempt;
    job.completed_at_ms = record.completed_at_ms;
    job.result = record.result;
    return job;
  }
  DueKey key{record.due_at_ms, id};
  if (const Lease* lease = leases_.Find(id)) {
    job.state = JobState::kReserved;
    job.attempt = lease->attempt;
    job.lease_deadline_ms = lease->deadline_ms;
    if (lease->has_progress) {
      auto progress = ProgressLocked(q->name, lease->key);
      if (!progress.ok()) return progress.status();
      job.progress = std::move(*progress);
    }
  } else if (auto r = q->ready.find(key); r != q->ready.end()) {
    job.state = JobState::kReady;
    job.attempt = r->second.attempt;
  } else if (auto attempt = q->window.Find(key)) {
    job.state = JobState::kScheduled;
    job.attempt = *attempt;
  } else {
    std::string raw;
    DueRecord due;
    DELAYQ_RETURN_IF_ERROR(storage_->Get(Cf::kDue, DueIndexKey(q->name, key), &raw));
    DELAYQ_RETURN_IF_ERROR(DecodeDueRecord(raw, &due));
    job.state = JobState::kScheduled;
    job.attempt = due.attempt;
  }
  return job;
}

Result<Job> EngineImpl::Get(std::string_view queue, const JobRef& ref) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  if (!q) return UnknownQueue(queue);  // before the ref's own errors, on every store
  DELAYQ_RETURN_IF_ERROR(ValidateJobRef(ref));
  Ulid id;
  JobRecord record;
  Status s = ResolveRefLocked(q, ref, &id, &record);
  if (s.code() == Code::kNotFound) s = ResolveCompletedLocked(q, ref, &id, &record);
  DELAYQ_RETURN_IF_ERROR(s);
  return JobViewLocked(q, id, record);
}

Status EngineImpl::Cancel(std::string_view queue, const JobRef& ref) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(CancelLocked(op, queue, ref));
  return op.Finish();
}

void EngineImpl::CancelAsync(std::string_view queue, const JobRef& ref, CancelCallback done) {
  if (Status valid = ValidateQueueName(queue); !valid.ok()) return done(valid);
  Op op(*this, Op::kWrites);
  if (Status s = CancelLocked(op, queue, ref); !s.ok()) {
    op.Unlock();
    return done(s);
  }
  op.FinishAsync(std::move(done));
}

// The locked part of a cancel (written, not yet durable); the caller finishes `op`.
Status EngineImpl::CancelLocked(Op& op, std::string_view queue, const JobRef& ref) {
  DELAYQ_RETURN_IF_ERROR(op.status());
  {
    QueueState* q = FindQueueLocked(queue);
    if (!q) return UnknownQueue(queue);
    Ulid id;
    JobRecord record;
    bool in_due = false;
    if (Status s = ResolveRefLocked(q, ref, &id, &record, &in_due); s.code() == Code::kNotFound) {
      DELAYQ_RETURN_IF_ERROR(ResolveCompletedLocked(q, ref, &id, &record));
      return DeleteCompletedLocked(op, q, id, record);
    } else if (!s.ok()) {
      return s;
    }
    if (leases_.contains(id)) return errors::ReservedCannotCancel(id.ToString());
    auto batch = storage_->NewBatch();
    if (!in_due) batch->Delete(Cf::kJobs, id.Raw());
    DueKey key{record.due_at_ms, id};
    if (record.dead) {
      batch->Delete(Cf::kDead, DeadIndexKey(queue, record.dead_at_ms, id));
    } else {
      batch->Delete(Cf::kDue, DueIndexKey(queue, key));
      if (record.key_indexed) {
        ReleaseKey(*storage_, queue, id, record.key, record.due_at_ms, record.key_ttl_ms, op.now().wall_ms(), *batch);
      }
    }
    DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
    if (record.dead) {
      --q->dead;
    } else {
      UnplaceLocked(q, key);
      --q->live;
      if (outcomes_.any()) outcomes_.Notify(queue, id.ToString(), JobState::kCancelled);
    }
  }
  return Status::Ok();
}

Result<Job> EngineImpl::Reschedule(std::string_view queue, const JobRef& ref, const When& when) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  auto result = RescheduleLocked(op, queue, ref, when);
  if (!result.ok()) return result;
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return result;
}

void EngineImpl::RescheduleAsync(std::string_view queue, const JobRef& ref, const When& when, JobCallback done) {
  if (Status valid = ValidateQueueName(queue); !valid.ok()) return done(valid);
  Op op(*this, Op::kWrites);
  FinishWith(op, RescheduleLocked(op, queue, ref, when), std::move(done));
}

Result<Job> EngineImpl::RescheduleLocked(Op& op, std::string_view queue, const JobRef& ref, const When& when) {
  DELAYQ_RETURN_IF_ERROR(op.status());
  Result<Job> result = Status::Internal("unset");
  {
    QueueState* q = FindQueueLocked(queue);
    if (!q) return UnknownQueue(queue);
    Ulid id;
    JobRecord record;
    if (Status s = ResolveRefLocked(q, ref, &id, &record); s.code() == Code::kNotFound) {
      DELAYQ_RETURN_IF_ERROR(ResolveCompletedLocked(q, ref, &id, &record));
      return errors::CompletedCannotReschedule(id.ToString());
    } else if (!s.ok()) {
      return s;
    }
    if (leases_.contains(id)) return errors::ReservedCannotReschedule(id.ToString());
    if (record.dead) return errors::DeadCannotReschedule(id.ToString());
    auto due = ResolveDue(when, op.now().wall_ms(), ConfigOf(q));
    if (!due.ok()) return due.status();
    DueKey old_key{record.due_at_ms, id};
    DueKey key{*due, id};
    std::string raw;
    DueRecord due_rec;
    DELAYQ_RETURN_IF_ERROR(storage_->Get(Cf::kDue, DueIndexKey(queue, old_key), &raw));
    DELAYQ_RETURN_IF_ERROR(DecodeDueRecord(raw, &due_rec));
    record.due_at_ms = *due;
    auto batch = storage_->NewBatch();
    batch->Put(Cf::kJobs, id.Raw(), EncodeJobRecord(record));
    batch->Delete(Cf::kDue, DueIndexKey(queue, old_key));
    DueRecord moved{key.due_ms, due_rec.attempt, {}, 0};
    moved.priority = record.priority;
    moved.group = record.group;
    batch->Put(Cf::kDue, DueIndexKey(queue, key), EncodeDueRecord(moved));
    DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
    UnplaceLocked(q, old_key);
    PlaceLocked(q, key, due_rec.attempt, {}, false, op.now().wall_us, Lane{record.priority, record.group});
    ServeWaitersLocked(q, op.now(), op.deferred());
    result = JobViewLocked(q, id, record);
  }
  return result;
}

}  // namespace delayq
