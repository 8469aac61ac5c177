// Engine lifecycle and the operations on jobs and queues (deliveries are in
// engine_delivery.cc). Every mutating operation: validate, plan a WriteBatch under the lock,
// write it, apply it to memory, release the lock, wait for durability.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>

#include "core/errors.h"
#include "core/validate.h"
#include "store/embedded/engine_impl.h"

namespace delayq {

EngineImpl::EngineImpl(const EngineOptions& options, std::unique_ptr<Storage> storage)
    : options_(options),
      clock_(options.clock ? options.clock : SystemClock::Instance()),
      storage_(std::move(storage)),
      commit_(storage_.get()),
      rng_(std::random_device{}()) {}

EngineImpl::~EngineImpl() { Close(); }

Status EngineImpl::Start() {
  {
    std::lock_guard lock(mu_);
    DELAYQ_RETURN_IF_ERROR(LoadReceiptSecretLocked());
    DELAYQ_RETURN_IF_ERROR(RecoverLocked());
  }
  clock_listener_ = clock_->AddListener([this] {
    std::lock_guard lock(mu_);
    poked_ = true;
    cv_.notify_one();
  });
  if (options_.durability == Durability::kInterval) {
    commit_.StartInterval(options_.sync_interval_ms);
  }
  scheduler_ = std::thread([this] { SchedulerLoop(); });
  return Status::Ok();
}

// The secret that signs receipts: made once, stored durably before any receipt is issued, so
// receipts stay valid across restarts.
Status EngineImpl::LoadReceiptSecretLocked() {
  static constexpr std::string_view kKey = "receipt-secret";
  std::string secret;
  Status s = storage_->Get(Cf::kMeta, kKey, &secret);
  if (s.code() == Code::kNotFound || (s.ok() && secret.size() != ReceiptSigner::kSecretBytes)) {
    secret = ReceiptSigner::NewSecret();
    auto batch = storage_->NewBatch();
    batch->Put(Cf::kMeta, kKey, secret);
    DELAYQ_RETURN_IF_ERROR(storage_->Write(*batch));
    DELAYQ_RETURN_IF_ERROR(storage_->SyncWal());
  } else {
    DELAYQ_RETURN_IF_ERROR(s);
  }
  signer_.emplace(std::move(secret));
  return Status::Ok();
}

void EngineImpl::Close() {
  {
    Deferred deferred;  // runs after the lock is released
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (auto& [handle, waiter] : waiters_) {
      deferred.Add([done = std::move(waiter.done)] { done(std::vector<Delivery>{}); });
    }
    waiters_.clear();
    waiter_deadlines_.clear();
    for (auto& [name, q] : queues_) q->waiters.clear();
    cv_.notify_all();
  }
  if (scheduler_.joinable()) scheduler_.join();
  clock_->RemoveListener(clock_listener_);
  commit_.StopInterval();
  Status s = commit_.SyncAll();
  if (!s.ok()) spdlog::error("closing the store: {}", s.ToString());
}

EngineInfo EngineImpl::Info() {
  std::lock_guard lock(mu_);
  return {window_entries_, ready_entries_, leases_.size(), waiters_.size(), queues_.size(),
          write_seq_,      commit_.syncs()};
}

Status EngineImpl::Health() {
  std::lock_guard lock(mu_);
  DELAYQ_RETURN_IF_ERROR(CheckOpenLocked());
  Status why;
  if (!storage_->Healthy(&why)) {
    return Status::Unavailable("the store cannot write until its disk works again: " + why.message());
  }
  return Status::Ok();
}

Status EngineImpl::CheckOpenLocked() const {
  if (closed_) return errors::StoreClosed();
  return Status::Ok();
}

EngineImpl::Op::Op(EngineImpl& engine, Kind kind)
    : engine_(engine),
      in_flight_(kind == kWrites && engine.options_.durability == Durability::kSync
                     ? &engine.commit_
                     : nullptr),
      lock_(engine.mu_),
      now_(engine.NowLocked()),
      status_(engine.CheckOpenLocked()) {
  if (status_.ok() && !engine_.storage_->Healthy()) engine_.HealLocked(deferred_);
  if (status_.ok()) engine_.TickLocked(now_, deferred_);
}

Status EngineImpl::Op::Write(WriteBatch& batch) {
  uint64_t seq = 0;
  DELAYQ_RETURN_IF_ERROR(engine_.WriteLocked(batch, &seq));
  seq_ = std::max(seq_, seq);
  return Status::Ok();
}

void EngineImpl::Op::Unlock() {
  if (lock_.owns_lock()) lock_.unlock();
  in_flight_.Done();
  deferred_.Run();
}

Status EngineImpl::Op::Finish() {
  Unlock();
  return engine_.WaitDurable(seq_);
}

QueueState* EngineImpl::FindQueueLocked(std::string_view name) {
  auto it = queues_.find(name);
  return it == queues_.end() || it->second->provisional ? nullptr : it->second.get();
}

QueueState* EngineImpl::GetOrCreateQueueLocked(std::string_view name) {
  auto it = queues_.find(name);
  if (it != queues_.end()) {
    if (it->second->provisional) {
      it->second->provisional = false;
      ++queue_count_;
    }
    return it->second.get();
  }
  auto q = std::make_unique<QueueState>(std::string(name));
  ++queue_count_;
  return queues_.emplace(q->name, std::move(q)).first->second.get();
}

Status EngineImpl::RoomForQueueLocked(std::string_view name) {
  if (FindQueueLocked(name) == nullptr && queue_count_ >= options_.max_queues) {
    return errors::QueueLimit(name, queue_count_ + 1, options_.max_queues);
  }
  return Status::Ok();
}

Result<QueueState*> EngineImpl::CreateQueueLocked(std::string_view name) {
  DELAYQ_RETURN_IF_ERROR(RoomForQueueLocked(name));
  return GetOrCreateQueueLocked(name);
}

QueueState* EngineImpl::QueueForWaiterLocked(std::string_view name) {
  auto it = queues_.find(name);
  if (it != queues_.end()) return it->second.get();
  auto q = std::make_unique<QueueState>(std::string(name));
  q->provisional = true;
  return queues_.emplace(q->name, std::move(q)).first->second.get();
}

void EngineImpl::DropIfUnusedLocked(QueueState* q) {
  if (q == nullptr || !q->provisional) return;
  for (uint64_t handle : q->waiters) {
    if (waiters_.contains(handle)) return;
  }
  queues_.erase(q->name);
}

Status EngineImpl::WriteLocked(WriteBatch& batch, uint64_t* seq) {
  DELAYQ_RETURN_IF_ERROR(storage_->Write(batch));
  *seq = ++write_seq_;
  commit_.Written(*seq);
  return Status::Ok();
}

Status EngineImpl::WaitDurable(uint64_t seq) {
  if (seq == 0 || options_.durability != Durability::kSync) return Status::Ok();
  return commit_.WaitDurable(seq);
}

Result<EnqueueResult> EngineImpl::Enqueue(std::string_view queue, const EnqueueRequest& request) {
  auto r = EnqueueImpl(queue, std::span(&request, 1), false);
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

Result<std::vector<EnqueueResult>> EngineImpl::EnqueueBatch(
    std::string_view queue, std::span<const EnqueueRequest> requests) {
  return EnqueueImpl(queue, requests, true);
}

Result<std::vector<EnqueueResult>> EngineImpl::EnqueueImpl(
    std::string_view queue, std::span<const EnqueueRequest> requests, bool is_batch) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateBatchSize(requests.size()));
  auto prefix = [is_batch](size_t i) {
    return is_batch ? fmt::format("jobs[{}].", i) : std::string();
  };
  struct Placement {
    Ulid id;
    DueKey old_key;  // replacements only
    DueKey key;
    int32_t attempt = 0;
    bool replaced = false;
  };
  std::vector<EnqueueResult> results(requests.size());
  std::vector<Placement> placements;
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  const int64_t now_ms = op.now().wall_ms();
  {
    QueueState* q = FindQueueLocked(queue);
    if (!q) DELAYQ_RETURN_IF_ERROR(RoomForQueueLocked(queue));
    const QueueConfig& config = q ? ConfigOf(q) : options_.default_queue_config;

    std::vector<int64_t> dues(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      DELAYQ_RETURN_IF_ERROR(ValidateEnqueue(requests[i], config, prefix(i)));
      auto due = ResolveDue(requests[i].when, now_ms, config, prefix(i));
      if (!due.ok()) return due.status();
      dues[i] = *due;
    }

    auto batch = storage_->NewBatch();
    std::unordered_map<std::string_view, size_t> batch_keys;  // key -> first request using it
    for (size_t i = 0; i < requests.size(); ++i) {
      const EnqueueRequest& r = requests[i];
      std::string idem;
      if (!r.key.empty()) {
        if (auto it = batch_keys.find(r.key); it != batch_keys.end()) {
          results[i] = results[it->second];  // the first job of the batch with this key wins
          results[i].duplicate = true;
          results[i].replaced = false;
          continue;
        }
        batch_keys.emplace(r.key, i);
        idem = IdemKey(queue, r.key);
        std::string existing;
        Status s = storage_->Get(Cf::kKeys, idem, &existing);
        if (!s.ok() && s.code() != Code::kNotFound) return s;
        JobRecord record;
        std::string raw;
        if (s.ok()) s = storage_->Get(Cf::kJobs, existing, &raw);
        if (s.ok()) s = DecodeJobRecord(raw, &record);
        if (s.ok()) {
          Ulid id = Ulid::FromRaw(existing);
          if (!r.replace) {
            results[i] = {id.ToString(), record.due_at_ms, true, false};
            continue;
          }
          if (leases_.contains(id)) {
            return errors::ReservedCannotReplace(prefix(i), r.key, id.ToString());
          }
          DueKey old_key{record.due_at_ms, id};
          std::string due_raw;
          DueRecord due_rec;
          DELAYQ_RETURN_IF_ERROR(
              storage_->Get(Cf::kDue, DueIndexKey(queue, old_key), &due_raw));
          DELAYQ_RETURN_IF_ERROR(DecodeDueRecord(due_raw, &due_rec));
          record.payload = r.payload;
          record.binary = r.binary;
          record.headers = r.headers;
          record.due_at_ms = dues[i];
          if (r.max_attempts) record.max_attempts = *r.max_attempts;
          // Replaced: new content in the old job's place, so its attempts start again (the
          // Lua twin is kEnqueueScript).
          record.attempt = 0;
          DueKey key{dues[i], id};
          batch->Put(Cf::kJobs, id.Raw(), EncodeJobRecord(record));
          batch->Delete(Cf::kDue, DueIndexKey(queue, old_key));
          batch->Put(Cf::kDue, DueIndexKey(queue, key), EncodeDueRecord({key.due_ms, 0, {}, 0}));
          placements.push_back({id, old_key, key, 0, true});
          results[i] = {id.ToString(), dues[i], true, true};
          continue;
        }
        if (s.code() != Code::kNotFound) return s;
      }
      Ulid id = ids_.Next(now_ms);
      JobRecord record;
      record.queue = std::string(queue);
      record.key = r.key;
      record.key_indexed = !r.key.empty();
      record.due_at_ms = dues[i];
      record.created_at_ms = now_ms;
      record.max_attempts = r.max_attempts.value_or(config.max_attempts);
      record.headers = r.headers;
      record.payload = r.payload;
      record.binary = r.binary;
      DueKey key{dues[i], id};
      batch->Put(Cf::kJobs, id.Raw(), EncodeJobRecord(record));
      batch->Put(Cf::kDue, DueIndexKey(queue, key), EncodeDueRecord({key.due_ms, 0, {}, 0}));
      if (!idem.empty()) batch->Put(Cf::kKeys, idem, id.Raw());
      placements.push_back({id, {}, key, 0, false});
      results[i] = {id.ToString(), dues[i], false, false};
    }

    if (batch->Count() > 0) DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
    if (!q) q = GetOrCreateQueueLocked(queue);
    for (const Placement& p : placements) {
      if (p.replaced) {
        UnplaceLocked(q, p.old_key);
      } else {
        ++q->live;
        ++q->counters.enqueued;
      }
      PlaceLocked(q, p.key, p.attempt, {}, false, op.now().wall_us);
    }
    ServeWaitersLocked(q, op.now(), op.deferred());
  }
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return results;
}

Status EngineImpl::ResolveRefLocked(QueueState* q, const JobRef& ref, Ulid* id,
                                    JobRecord* record) {
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
    *id = Ulid::FromRaw(raw);
  }
  Status s = storage_->Get(Cf::kJobs, id->Raw(), &raw);
  if (s.code() == Code::kNotFound) return errors::NoSuchJob(q->name, id->ToString());
  DELAYQ_RETURN_IF_ERROR(s);
  DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(raw, record));
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
  if (record.dead) {
    job.state = JobState::kDead;
    job.attempt = record.attempt;
    job.dead_at_ms = record.dead_at_ms;
    return job;
  }
  DueKey key{record.due_at_ms, id};
  if (auto it = leases_.find(id); it != leases_.end()) {
    job.state = JobState::kReserved;
    job.attempt = it->second.attempt;
    job.lease_deadline_ms = it->second.deadline_ms;
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
  if (!q) return UnknownQueue(queue);
  Ulid id;
  JobRecord record;
  DELAYQ_RETURN_IF_ERROR(ResolveRefLocked(q, ref, &id, &record));
  return JobViewLocked(q, id, record);
}

Status EngineImpl::Cancel(std::string_view queue, const JobRef& ref) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  {
    QueueState* q = FindQueueLocked(queue);
    if (!q) return UnknownQueue(queue);
    Ulid id;
    JobRecord record;
    DELAYQ_RETURN_IF_ERROR(ResolveRefLocked(q, ref, &id, &record));
    if (leases_.contains(id)) return errors::ReservedCannotCancel(id.ToString());
    auto batch = storage_->NewBatch();
    batch->Delete(Cf::kJobs, id.Raw());
    DueKey key{record.due_at_ms, id};
    if (record.dead) {
      batch->Delete(Cf::kDead, DeadIndexKey(queue, record.dead_at_ms, id));
    } else {
      batch->Delete(Cf::kDue, DueIndexKey(queue, key));
      if (record.key_indexed) batch->Delete(Cf::kKeys, IdemKey(queue, record.key));
    }
    DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
    if (record.dead) {
      --q->dead;
    } else {
      UnplaceLocked(q, key);
      --q->live;
    }
  }
  return op.Finish();
}

Result<Job> EngineImpl::Reschedule(std::string_view queue, const JobRef& ref, const When& when) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  Result<Job> result = Status::Internal("unset");
  {
    QueueState* q = FindQueueLocked(queue);
    if (!q) return UnknownQueue(queue);
    Ulid id;
    JobRecord record;
    DELAYQ_RETURN_IF_ERROR(ResolveRefLocked(q, ref, &id, &record));
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
    batch->Put(Cf::kDue, DueIndexKey(queue, key),
               EncodeDueRecord({key.due_ms, due_rec.attempt, {}, 0}));
    DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
    UnplaceLocked(q, old_key);
    PlaceLocked(q, key, due_rec.attempt, {}, false, op.now().wall_us);
    ServeWaitersLocked(q, op.now(), op.deferred());
    result = JobViewLocked(q, id, record);
  }
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return result;
}

QueueStats EngineImpl::StatsLocked(QueueState* q, const Instant& now) {
  const int64_t now_ms = now.wall_ms();
  QueueStats s;
  s.name = q->name;
  s.ready = static_cast<int64_t>(q->ready.size());
  s.reserved = q->reserved;
  s.scheduled = q->live - s.ready - s.reserved;
  s.dead = q->dead;
  s.paused = q->meta.paused;
  s.counters = q->counters;
  s.lateness = q->lateness.Summary();
  if (!q->window.empty()) s.earliest_due_at_ms = q->window.Front().due_ms;
  if (!q->ready.empty()) s.oldest_ready_ms = std::max<int64_t>(0, now_ms - q->ready.begin()->first.due_ms);
  const int64_t limit = now_ms + 60'000;
  s.due_next_60s = q->window.CountDueBy(limit);
  if (!q->window_complete && q->window_end < DueBucket(limit)) {  // the rest is on disk
    auto cursor = storage_->Scan(Cf::kDue, DueBucketKey(q->name, q->window_end + 1),
                                 DueBucketKey(q->name, DueBucket(limit) + 1));
    for (; cursor->Valid(); cursor->Next()) {
      std::string_view name;
      int64_t bucket;
      DueKey key;
      DueRecord rec;
      if (ParseTimeIdKey(cursor->key(), &name, &bucket, &key.id) &&
          DecodeDueRecord(cursor->value(), &rec).ok() && rec.due_ms <= limit &&
          rec.lease_deadline_ms == 0 && !leases_.contains(key.id) &&
          !q->ready.contains({rec.due_ms, key.id})) {
        ++s.due_next_60s;
      }
    }
  }
  return s;
}

Result<QueueStats> EngineImpl::Stats(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  if (!q) return UnknownQueue(queue);
  return StatsLocked(q, op.now());
}

Result<std::vector<QueueStats>> EngineImpl::ListQueues() {
  Op op(*this, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  std::vector<QueueStats> out;
  out.reserve(queue_count_);
  for (auto& [name, q] : queues_) {
    if (!q->provisional) out.push_back(StatsLocked(q.get(), op.now()));
  }
  return out;
}

Result<ScheduleHistogram> EngineImpl::Schedule(std::string_view queue, int64_t bucket_ms,
                                               int32_t buckets) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateScheduleHistogram(bucket_ms, buckets));
  Op op(*this, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  if (!q) return UnknownQueue(queue);
  const int64_t now_ms = op.now().wall_ms();
  ScheduleHistogram h;
  h.start_ms = now_ms / 60'000 * 60'000;
  h.bucket_ms = bucket_ms;
  h.buckets.assign(static_cast<size_t>(buckets), 0);
  for (auto& [minute, count] : q->schedule) {
    int64_t offset = std::max<int64_t>(0, minute * 60'000 - h.start_ms) / bucket_ms;
    if (offset < buckets) {
      h.buckets[static_cast<size_t>(offset)] += count;
    } else {
      h.later += count;
    }
  }
  return h;
}

Result<QueueConfig> EngineImpl::GetConfig(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  return q ? ConfigOf(q) : options_.default_queue_config;
}

Status EngineImpl::PersistMetaLocked(Op& op, QueueState* q, const QueueMeta& meta) {
  auto batch = storage_->NewBatch();
  batch->Put(Cf::kMeta, MetaQueueKey(q->name), EncodeQueueMeta(meta));
  DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
  q->meta = meta;
  return Status::Ok();
}

Status EngineImpl::SetConfig(std::string_view queue, const QueueConfig& config) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateConfig(config));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  auto created = CreateQueueLocked(queue);
  if (!created.ok()) return created.status();
  QueueState* q = *created;
  QueueMeta meta = q->meta;
  meta.config = config;
  meta.has_config = true;
  DELAYQ_RETURN_IF_ERROR(PersistMetaLocked(op, q, meta));
  PlanDeadSweepLocked(q);  // the retention may have changed
  return op.Finish();
}

Result<int64_t> EngineImpl::DeleteQueue(std::string_view queue, bool force) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  if (!q) return UnknownQueue(queue);
  if (!force && (q->live > 0 || q->dead > 0)) {
    return errors::QueueNotEmpty(q->name, q->live + q->dead);
  }
  // Every row of the queue, in one batch: its due index and records, its dead index and
  // records, its keys and its meta. (A queue of millions of jobs makes this one large write.)
  auto batch = storage_->NewBatch();
  int64_t deleted = 0;
  for (Cf index : {Cf::kDue, Cf::kDead}) {
    auto cursor = storage_->Scan(index, QueuePrefix(queue), QueuePrefixEnd(queue));
    for (; cursor->Valid(); cursor->Next()) {
      std::string_view name;
      int64_t ms;
      Ulid id;
      if (!ParseTimeIdKey(cursor->key(), &name, &ms, &id)) {
        return Status::Corruption("an index entry of queue " + q->name + " is malformed");
      }
      batch->Delete(Cf::kJobs, id.Raw());
      batch->Delete(index, cursor->key());
      ++deleted;
    }
    DELAYQ_RETURN_IF_ERROR(cursor->status());
  }
  auto keys = storage_->Scan(Cf::kKeys, QueuePrefix(queue), QueuePrefixEnd(queue));
  for (; keys->Valid(); keys->Next()) batch->Delete(Cf::kKeys, keys->key());
  DELAYQ_RETURN_IF_ERROR(keys->status());
  batch->Delete(Cf::kMeta, MetaQueueKey(queue));
  DELAYQ_RETURN_IF_ERROR(op.Write(*batch));

  // Memory: its leases, its place among the windows, then the queue itself.
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.queue != q) {
      ++it;
      continue;
    }
    lease_deadlines_.erase({it->second.deadline_mono_us, it->first});
    it = leases_.erase(it);
  }
  for (auto it = heads_.begin(); it != heads_.end();) it = it->second == q ? heads_.erase(it) : std::next(it);
  refill_pending_.erase(q);
  if (q->dead_sweep_at_ms != kNoTime) dead_sweeps_.erase({q->dead_sweep_at_ms, q});
  window_entries_ -= q->window.size();
  ready_entries_ -= q->ready.size();
  --queue_count_;
  std::deque<uint64_t> waiting = std::move(q->waiters);
  const std::string name = q->name;
  queues_.erase(name);
  if (std::any_of(waiting.begin(), waiting.end(), [&](uint64_t h) { return waiters_.contains(h); })) {
    QueueState* fresh = QueueForWaiterLocked(name);  // they wait on, as on any name
    fresh->waiters = std::move(waiting);
    for (uint64_t h : fresh->waiters) {
      if (auto w = waiters_.find(h); w != waiters_.end()) w->second.queue = fresh;
    }
  }
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return deleted;
}

Status EngineImpl::Pause(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  auto created = CreateQueueLocked(queue);
  if (!created.ok()) return created.status();
  QueueState* q = *created;
  QueueMeta meta = q->meta;
  meta.paused = true;
  DELAYQ_RETURN_IF_ERROR(PersistMetaLocked(op, q, meta));
  return op.Finish();
}

Status EngineImpl::Resume(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  auto created = CreateQueueLocked(queue);
  if (!created.ok()) return created.status();
  QueueState* q = *created;
  QueueMeta meta = q->meta;
  meta.paused = false;
  DELAYQ_RETURN_IF_ERROR(PersistMetaLocked(op, q, meta));
  ServeWaitersLocked(q, op.now(), op.deferred());
  return op.Finish();
}

Result<std::unique_ptr<Engine>> OpenEngineOnStorage(const EngineOptions& options,
                                                    std::unique_ptr<Storage> storage) {
  if (options.sync_interval_ms < 1 || options.sync_interval_ms > 60'000) {
    return Status::InvalidArgument(fmt::format(
        "sync_interval_ms is {}; it must be between 1 and 60000", options.sync_interval_ms));
  }
  if (options.window_capacity < 16 || options.window_refill < 1 ||
      options.window_refill > options.window_capacity) {
    return Status::InvalidArgument(fmt::format(
        "window_capacity is {} and window_refill {}; the capacity must be at least 16 and the "
        "refill between 1 and the capacity",
        options.window_capacity, options.window_refill));
  }
  Status s = ValidateConfig(options.default_queue_config);
  if (!s.ok()) return Status::InvalidArgument("default queue config: " + s.message());
  auto engine = std::make_unique<EngineImpl>(options, std::move(storage));
  DELAYQ_RETURN_IF_ERROR(engine->Start());
  return std::unique_ptr<Engine>(std::move(engine));
}

Result<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& options) {
  if (options.path.empty()) {
    return Status::InvalidArgument("path is empty; give the directory to keep the jobs in");
  }
  auto storage = OpenRocksDbStorage(
      {options.path, options.block_cache_bytes, options.write_buffer_bytes});
  if (!storage.ok()) return storage.status();
  return OpenEngineOnStorage(options, std::move(*storage));
}

}  // namespace delayq
