// Where live jobs sit in memory: the per-queue window of scheduled jobs (bounded, refilled
// from disk), the ready set, the leases, and the due-time histogram.
#include <spdlog/spdlog.h>

#include <cassert>

#include "store/embedded/engine_impl.h"

namespace delayq {

void EngineImpl::PlaceLocked(QueueState* q, const DueKey& key, int32_t attempt, DeliveryToken delivery, bool redelivery,
                             int64_t now_us, Lane lane) {
  if (key.due_ms * 1000 <= now_us) {
    q->ready.emplace(key, ReadyInfo{attempt, delivery, redelivery, std::move(lane)});
    ++ready_entries_;
  } else {
    q->due_histogram.Add(key.due_ms, +1);
    WindowInsertLocked(q, key, attempt, LaneByte(lane));
  }
}

// The lane of a job that comes due from the window: its priority is in the entry's lane byte;
// a group is read from its due entry (an error is logged and leaves it in the default group).
Lane EngineImpl::LaneComingDueLocked(QueueState* q, const DueKey& key, uint8_t lane_byte) {
  Lane lane{lane_byte & 0x0f, {}};
  if ((lane_byte & kLaneHasGroup) == 0) return lane;
  std::string value;
  DueRecord rec;
  Status s = storage_->Get(Cf::kDue, DueIndexKey(q->name, key), &value);
  if (s.ok()) s = DecodeDueRecord(value, &rec);
  if (!s.ok()) {
    spdlog::error("queue {}: reading the group of job {} failed ({}); it is served in the default group", q->name,
                  key.id.ToString(), s.ToString());
    return lane;
  }
  lane.group = rec.group;
  return lane;
}

// Whether a group has group_max_reserved jobs leased, counting `extra` more.
bool EngineImpl::GroupFullLocked(const QueueState* q, std::string_view group, int64_t cap, int64_t extra) const {
  if (cap <= 0) return false;
  return q->leases.InGroup(group) + extra >= cap;
}

void EngineImpl::UnplaceLocked(QueueState* q, const DueKey& key) {
  if (q->ready.erase(key) > 0) {
    --ready_entries_;
    return;
  }
  q->due_histogram.Add(key.due_ms, -1);
  WindowEraseLocked(q, key);
}

void EngineImpl::WindowInsertLocked(QueueState* q, const DueKey& key, int32_t attempt, uint8_t lane) {
  if (!q->window_complete && DueBucket(key.due_ms) > q->window_end) return;  // disk only
  std::optional<DueKey> old_head;
  if (!q->window.empty()) old_head = q->window.Front();
  q->window.Insert(key, attempt, lane);
  ++window_entries_;
  UpdateHeadLocked(q, old_head);
  if (window_entries_ > options_.window_capacity) EvictLocked();
}

void EngineImpl::WindowEraseLocked(QueueState* q, const DueKey& key) {
  if (q->window.empty()) return;
  std::optional<DueKey> old_head = q->window.Front();
  if (!q->window.Erase(key)) return;  // on disk only
  --window_entries_;
  if (q->window.empty() && !q->window_complete) {
    RefillOrRetryLocked(q);
  }
  UpdateHeadLocked(q, old_head);
}

void EngineImpl::UpdateHeadLocked(QueueState* q, const std::optional<DueKey>& old_head) {
  std::optional<DueKey> new_head;
  if (!q->window.empty()) new_head = q->window.Front();
  if (old_head == new_head) return;
  if (old_head) heads_.erase({*old_head, q});
  if (new_head) {
    heads_.emplace(*new_head, q);
    PokeWallLocked(new_head->due_ms * 1000);
  }
}

// Reads the next whole due buckets of `q` after its window from disk, at least window_refill
// jobs' worth. Only called when the window is empty and incomplete; callers update heads_.
Status EngineImpl::RefillLocked(QueueState* q) {
  auto cursor = storage_->Scan(Cf::kDue, DueBucketKey(q->name, q->window_end + 1), QueuePrefixEnd(q->name));
  size_t loaded = 0;
  int64_t last_bucket = q->window_end;
  for (; cursor->Valid(); cursor->Next()) {
    std::string_view name;
    int64_t bucket;
    Ulid id;
    DueRecord rec;
    if (!ParseTimeIdKey(cursor->key(), &name, &bucket, &id) || !DecodeDueRecord(cursor->value(), &rec).ok()) {
      return Status::Corruption("a due-index entry of queue " + q->name + " is malformed");
    }
    if (bucket != last_bucket && loaded >= options_.window_refill) break;  // buckets stay whole
    last_bucket = bucket;
    const DueKey key{rec.due_ms, id};
    // Ready and reserved jobs are in the due index too; they are not scheduled.
    if (rec.lease_deadline_ms != 0 || leases_.contains(id) || q->ready.contains(key)) continue;
    q->window.Insert(key, rec.attempt, LaneByte(rec.priority, rec.group));
    ++window_entries_;
    ++loaded;
  }
  DELAYQ_RETURN_IF_ERROR(cursor->status());
  if (!cursor->Valid()) {
    q->window_complete = true;
    q->window_end = kNoBucket;
  } else {
    q->window_end = last_bucket;
  }
  refill_pending_.erase(q);
  return Status::Ok();
}

// Refills an empty window; when reading fails, the scheduler retries every second (and is
// woken now to plan that).
void EngineImpl::RefillOrRetryLocked(QueueState* q) {
  Status s = RefillLocked(q);
  if (s.ok()) return;
  spdlog::error("queue {}: reading scheduled jobs failed: {}", q->name, s.ToString());
  refill_pending_.insert(q);
  poked_ = true;
  cv_.notify_one();
}

// Keeps the windows near window_capacity by dropping the last due buckets of the biggest
// windows (they are on disk and come back by Refill). A window keeps at least one bucket.
void EngineImpl::EvictLocked() {
  const size_t target = options_.window_capacity - options_.window_capacity / 8;
  while (window_entries_ > target) {
    QueueState* biggest = nullptr;
    for (auto& [name, q] : queues_) {
      if (q->window.BucketCount() < 2) continue;
      if (!biggest || q->window.size() > biggest->window.size()) biggest = q.get();
    }
    if (!biggest) return;
    const int64_t drop = biggest->window.LastBucket();
    window_entries_ -= biggest->window.DropLastBucket();
    biggest->window_end = drop - 1;
    biggest->window_complete = false;
  }
}

void EngineImpl::AddLeaseLocked(const Ulid& id, Lease lease) {
  PokeMonoLocked(lease.deadline_mono_us);
  leases_.Add(id, std::move(lease));
}

void EngineImpl::PokeWallLocked(int64_t wall_us) {
  if (wall_us < wake_at_.wall_us) {
    wake_at_.wall_us = wall_us;
    poked_ = true;
    cv_.notify_one();
  }
}

void EngineImpl::PokeMonoLocked(int64_t mono_us) {
  if (mono_us < wake_at_.mono_us) {
    wake_at_.mono_us = mono_us;
    poked_ = true;
    cv_.notify_one();
  }
}

}  // namespace delayq
