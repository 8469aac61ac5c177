// Queues on the embedded store: stats, the list, the schedule histogram, config, delete, pause
// and resume. The Redis store's twins are redis_queue_admin.cc and redis_config.cc.
#include <algorithm>

#include "core/errors.h"
#include "core/validate.h"
#include "store/embedded/engine_impl.h"

namespace delayq {

// The top groups by ready jobs, then groups with only leased jobs up to the same number; none
// while no job of the queue has a named group.
void EngineImpl::GroupsLocked(const QueueState* q, QueueStats* s) const {
  std::vector<GroupCount> top = q->ready.TopGroups(Limits::kStatsGroups);
  if (!q->ready.ordered() && !q->ready.empty()) top.push_back({"", static_cast<int64_t>(q->ready.size())});
  const bool named = q->leases.any_named() ||
                     std::any_of(top.begin(), top.end(), [](const GroupCount& g) { return !g.group.empty(); });
  if (!named) return;
  auto leased = [&](const std::string& group) { return q->leases.InGroup(group); };
  for (const GroupCount& g : top) s->groups.push_back({g.group, g.ready, leased(g.group)});
  auto listed = [&](std::string_view group) {
    return std::any_of(s->groups.begin(), s->groups.end(),
                       [&](const QueueStats::Group& g) { return g.group == group; });
  };
  if (s->groups.size() < Limits::kStatsGroups && !listed("") && leased("") > 0)
    s->groups.push_back({"", 0, leased("")});
  for (const auto& [group, n] : q->leases.named_groups()) {
    if (s->groups.size() >= Limits::kStatsGroups) break;
    if (!listed(group)) s->groups.push_back({group, 0, n});
  }
}

QueueStats EngineImpl::StatsLocked(QueueState* q, const Instant& now) {
  const int64_t now_ms = now.wall_ms();
  QueueStats s;
  s.name = q->name;
  s.ready = static_cast<int64_t>(q->ready.size());
  s.reserved = q->leases.total();
  s.scheduled = q->live - s.ready - s.reserved;
  s.dead = q->dead;
  s.completed = q->completed;
  s.paused = q->meta.paused;
  s.counters = q->counters;
  s.lateness = q->lateness.Summary();
  s.limit_wait = q->flow.limit_wait().Summary();
  if (!q->window.empty()) s.earliest_due_at_ms = q->window.Front().due_ms;
  if (!q->ready.empty()) s.oldest_ready_ms = std::max<int64_t>(0, now_ms - q->ready.begin()->first.due_ms);
  GroupsLocked(q, &s);
  const int64_t limit = now_ms + 60'000;
  s.due_next_60s = q->window.CountDueBy(limit);
  if (!q->window_complete && q->window_end < DueBucket(limit)) {  // the rest is on disk
    auto cursor =
        storage_->Scan(Cf::kDue, DueBucketKey(q->name, q->window_end + 1), DueBucketKey(q->name, DueBucket(limit) + 1));
    for (; cursor->Valid(); cursor->Next()) {
      std::string_view name;
      int64_t bucket;
      DueKey key;
      DueRecord rec;
      if (ParseTimeIdKey(cursor->key(), &name, &bucket, &key.id) && DecodeDueRecord(cursor->value(), &rec).ok() &&
          rec.due_ms <= limit && rec.lease_deadline_ms == 0 && !leases_.contains(key.id) &&
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

Result<ScheduleHistogram> EngineImpl::Schedule(std::string_view queue, int64_t bucket_ms, int32_t buckets) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateScheduleHistogram(bucket_ms, buckets));
  Op op(*this, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  if (!q) return UnknownQueue(queue);
  return q->due_histogram.Buckets(op.now().wall_ms(), bucket_ms, buckets);
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
  PlanSweepLocked(kDeadSet, q);  // the retention may have changed
  PlanSweepLocked(kCompletedSet, q);
  // Limits raised (rate, burst, max_reserved, group_max_reserved) may now allow what waiting
  // reserves were held back from: they are served now, not at their next token or lease end.
  ServeWaitersLocked(q, op.now(), op.deferred());
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
  // Its completed jobs go with it (they never keep a queue from being deleted).
  auto done = storage_->Scan(Cf::kMeta, DonePrefix(queue), DonePrefixEnd(queue));
  for (; done->Valid(); done->Next()) {
    std::string_view name;
    int64_t ms;
    Ulid id;
    if (!ParseTimeIdKey(done->key().substr(DonePrefix("").size()), &name, &ms, &id)) {
      return Status::Corruption("a completed-index entry of queue " + q->name + " is malformed");
    }
    batch->Delete(Cf::kJobs, CompletedJobKey(id));
    batch->Delete(Cf::kMeta, done->key());
  }
  DELAYQ_RETURN_IF_ERROR(done->status());
  auto keys = storage_->Scan(Cf::kKeys, QueuePrefix(queue), QueuePrefixEnd(queue));
  for (; keys->Valid(); keys->Next()) batch->Delete(Cf::kKeys, keys->key());
  DELAYQ_RETURN_IF_ERROR(keys->status());
  batch->Delete(Cf::kMeta, MetaQueueKey(queue));
  auto schedules = storage_->Scan(Cf::kMeta, SchedulePrefix(queue), SchedulePrefixEnd(queue));
  for (; schedules->Valid(); schedules->Next()) batch->Delete(Cf::kMeta, schedules->key());
  DELAYQ_RETURN_IF_ERROR(schedules->status());
  DELAYQ_RETURN_IF_ERROR(op.Write(*batch));

  // Memory: its leases, its place among the windows, then the queue itself.
  leases_.DropQueue(q);
  for (auto it = heads_.begin(); it != heads_.end();) it = it->second == q ? heads_.erase(it) : std::next(it);
  refill_pending_.erase(q);
  dead_sweeps_.Drop(q);
  completed_sweeps_.Drop(q);
  flow_wakes_.Erase(q);
  window_entries_ -= q->window.size();
  ready_entries_ -= q->ready.size();
  --queue_count_;
  const std::string name = q->name;
  outcomes_.NotifyQueue(name, JobState::kCancelled);  // its waits end: their jobs are gone
  std::unique_ptr<QueueState> gone = std::move(queues_.find(name)->second);
  queues_.erase(name);
  if (waiters_.AnyIn(gone.get())) {
    QueueState* fresh = QueueForWaiterLocked(name);  // they wait on, as on any name
    waiters_.MoveLine(gone.get(), fresh);
  }
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return deleted;
}

Status EngineImpl::Pause(std::string_view queue) { return SetPaused(queue, true); }

Status EngineImpl::Resume(std::string_view queue) { return SetPaused(queue, false); }

// Persists the flag (creating the queue if it is new); a resume serves the waiting reserves.
Status EngineImpl::SetPaused(std::string_view queue, bool paused) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(*this, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  auto created = CreateQueueLocked(queue);
  if (!created.ok()) return created.status();
  QueueState* q = *created;
  QueueMeta meta = q->meta;
  meta.paused = paused;
  DELAYQ_RETURN_IF_ERROR(PersistMetaLocked(op, q, meta));
  if (!paused) ServeWaitersLocked(q, op.now(), op.deferred());
  return op.Finish();
}

}  // namespace delayq
