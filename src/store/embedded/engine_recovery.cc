// Recovery at open: one pass over the due index rebuilds every count, the ready sets, the
// leases and a first window per queue; one pass over the dead index counts the dead jobs.
// Nothing is rewritten: a reserved job whose lease ran out while delayq was down is still
// "reserved until T" on disk, and the first tick makes it ready (or dead) as it would have.
#include <spdlog/spdlog.h>

#include <chrono>

#include "store/embedded/engine_impl.h"

namespace delayq {

// A store that refused writes (a full disk, an I/O error) is made writable again by Heal; when
// that reopened it, writes that were not synced may be gone, so memory is rebuilt from the
// store as at open. The queues stay (waiting reserves point at them), with their counters.
void EngineImpl::HealLocked(Deferred& deferred) {
  bool reopened = false;
  if (!storage_->Heal(&reopened).ok() || !reopened) return;
  for (auto& [name, q] : queues_) {
    q->window = DueWindow();
    q->window_end = kNoBucket;
    q->window_complete = true;
    q->ready.clear();
    q->due_histogram.clear();
    q->live = q->dead = 0;
    q->leases.clear();
    q->dead_floor_ms = Clock::kNever;
    q->completed = 0;
    q->completed_floor_ms = Clock::kNever;
  }
  dead_sweeps_.clear();
  completed_sweeps_.clear();
  heads_.clear();
  refill_pending_.clear();
  refill_retry_mono_us_ = Clock::kNever;
  window_entries_ = ready_entries_ = 0;
  leases_.clear();
  Status s = RecoverLocked();
  if (!s.ok()) spdlog::error("rebuilding memory from the reopened store failed: {}", s.ToString());
  const Instant now = NowLocked();
  for (auto& [name, q] : queues_) ServeWaitersLocked(q.get(), now, deferred);
}

// The passes of a recovery, each over one index.
class EngineImpl::Recovery {
 public:
  explicit Recovery(EngineImpl& engine) : e_(engine), now_(engine.NowLocked()) {}
  Status Queues();     // their metadata (config, paused)
  Status Due();        // every live job: counted, and ready, in the window, or a lease to make
  Status Leases();     // the leases found by Due
  Status Dead();       // the dead jobs, counted
  Status Completed();  // the completed jobs kept, counted
  int64_t jobs() const { return jobs_; }
  int64_t dead() const { return dead_; }

 private:
  struct PendingLease {
    QueueState* queue;
    DueKey key;
    DueRecord due;  // its views (record, group, progress) are not used: they point into the scan's rows
    bool has_progress = false;
  };
  // A job that is not reserved: ready when due, else counted and in its queue's window while the
  // window takes whole buckets.
  void Place(QueueState* q, const DueKey& key, int64_t bucket, const DueRecord& rec);
  QueueState* QueueOf(std::string_view name) {  // the index is in queue order: mostly the last one
    if (!q_ || q_->name != name) q_ = e_.GetOrCreateQueueLocked(name);
    return q_;
  }

  EngineImpl& e_;
  const Instant now_;
  std::vector<PendingLease> pending_;
  QueueState* q_ = nullptr;
  int64_t jobs_ = 0;
  int64_t dead_ = 0;
};

Status EngineImpl::Recovery::Queues() {
  auto meta = e_.storage_->Scan(Cf::kMeta, MetaQueueKey(""), MetaQueueKey("\x7f"));
  for (; meta->Valid(); meta->Next()) {
    std::string_view name = meta->key().substr(MetaQueueKey("").size());
    QueueMeta m;
    DELAYQ_RETURN_IF_ERROR(DecodeQueueMeta(meta->value(), &m));
    e_.GetOrCreateQueueLocked(name)->meta = m;
  }
  return meta->status();
}

Status EngineImpl::Recovery::Due() {
  auto due = e_.storage_->Scan(Cf::kDue, "", "\x7f");
  for (; due->Valid(); due->Next()) {
    std::string_view name;
    int64_t bucket;
    DueKey key;
    DueRecord rec;
    if (!ParseTimeIdKey(due->key(), &name, &bucket, &key.id)) {
      return Status::Corruption("a due-index key is malformed");
    }
    DELAYQ_RETURN_IF_ERROR(DecodeDueRecord(due->value(), &rec));
    key.due_ms = rec.due_ms;
    QueueState* q = QueueOf(name);
    e_.ids_.Observe(key.id);
    ++q->live;
    ++jobs_;
    if (rec.lease_deadline_ms != 0) {
      pending_.push_back({q, key, rec, !rec.progress.empty()});
    } else {
      Place(q, key, bucket, rec);
    }
  }
  DELAYQ_RETURN_IF_ERROR(due->status());
  for (auto& [name, queue] : e_.queues_) {
    if (!queue->window.empty()) e_.heads_.emplace(queue->window.Front(), queue.get());
  }
  return Status::Ok();
}

void EngineImpl::Recovery::Place(QueueState* q, const DueKey& key, int64_t bucket, const DueRecord& rec) {
  if (key.due_ms * 1000 <= now_.wall_us) {
    q->ready.emplace(
        key, ReadyInfo{rec.attempt, rec.delivery, !rec.delivery.empty(), Lane{rec.priority, std::string(rec.group)}});
    ++e_.ready_entries_;
    return;
  }
  q->due_histogram.Add(key.due_ms, +1);
  if (!q->window_complete) return;  // this queue's window is full; the rest stays on disk
  // Whole buckets only: a new bucket starts only while the window is below its share.
  const int64_t last = q->window.empty() ? kNoBucket : q->window.LastBucket();
  if (q->window.empty() || bucket == last ||
      (q->window.size() < e_.options_.window_refill && e_.window_entries_ < e_.options_.window_capacity)) {
    q->window.Insert(key, rec.attempt, LaneByte(rec.priority, rec.group));
    ++e_.window_entries_;
  } else {
    q->window_complete = false;
    q->window_end = last;
  }
}

Status EngineImpl::Recovery::Leases() {
  for (const PendingLease& p : pending_) {
    JobRecord record;
    bool in_due = false;
    Status s = ReadRecord(*e_.storage_, p.queue->name, p.key.id, &p.key, &record, &in_due);
    if (!s.ok()) {
      return Status::Corruption(
          fmt::format("reserved job {} has no readable record: {}", p.key.id.ToString(), s.ToString()));
    }
    // The stored deadline is a wall-clock date; what is left of it runs on the monotonic clock.
    const int64_t left_us = std::max<int64_t>(0, p.due.lease_deadline_ms * 1000 - now_.wall_us);
    e_.AddLeaseLocked(p.key.id, Lease{p.queue, p.key, p.due.attempt, record.max_attempts, p.due.delivery,
                                      p.due.lease_deadline_ms, now_.mono_us + left_us, record.key, record.key_indexed,
                                      record.key_ttl_ms, in_due, Lane{record.priority, record.group}, p.has_progress});
  }
  return Status::Ok();
}

Status EngineImpl::Recovery::Dead() {
  auto cursor = e_.storage_->Scan(Cf::kDead, "", "\x7f");
  for (; cursor->Valid(); cursor->Next()) {
    std::string_view name;
    int64_t dead_at;
    Ulid id;
    if (!ParseTimeIdKey(cursor->key(), &name, &dead_at, &id)) {
      return Status::Corruption("a dead-index key is malformed");
    }
    QueueState* q = QueueOf(name);
    e_.ids_.Observe(id);
    if (q->dead++ == 0) q->dead_floor_ms = dead_at;  // the index is in death order
    ++dead_;
  }
  return cursor->status();
}

Status EngineImpl::Recovery::Completed() {
  const std::string prefix = DonePrefix("");
  auto cursor = e_.storage_->Scan(Cf::kMeta, prefix, DonePrefixEnd(""));
  for (; cursor->Valid(); cursor->Next()) {
    std::string_view name;
    int64_t completed_at;
    Ulid id;
    if (!ParseTimeIdKey(cursor->key().substr(prefix.size()), &name, &completed_at, &id)) {
      return Status::Corruption("a completed-index key is malformed");
    }
    QueueState* q = QueueOf(name);
    e_.ids_.Observe(id);
    if (q->completed++ == 0) q->completed_floor_ms = completed_at;  // the index is in completion order
  }
  return cursor->status();
}

Status EngineImpl::RecoverLocked() {
  const auto started = std::chrono::steady_clock::now();
  Recovery recovery(*this);
  DELAYQ_RETURN_IF_ERROR(recovery.Queues());
  DELAYQ_RETURN_IF_ERROR(recovery.Due());
  DELAYQ_RETURN_IF_ERROR(recovery.Leases());
  DELAYQ_RETURN_IF_ERROR(recovery.Dead());
  DELAYQ_RETURN_IF_ERROR(recovery.Completed());
  for (auto& [name, queue] : queues_) {
    PlanSweepLocked(kDeadSet, queue.get());
    PlanSweepLocked(kCompletedSet, queue.get());
  }
  wake_at_ = {0, 0};
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  spdlog::info(
      "recovered {} in {} ms: {} live jobs ({} ready, {} reserved, {} scheduled in memory), "
      "{} dead, {} queues",
      options_.path, ms, recovery.jobs(), ready_entries_, leases_.size(), window_entries_, recovery.dead(),
      queues_.size());
  return Status::Ok();
}

}  // namespace delayq
