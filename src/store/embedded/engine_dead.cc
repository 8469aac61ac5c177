// The dead-letter queue: how a job goes dead, replay and purge (the sweep of dead jobs past their
// queue's dead_retention_ms is engine_sweeps.cc).
//
// A dead job keeps its record in `jobs` (dead, with its attempts, last error and death time)
// and one entry in `dead` (queue | dead_at | id); it has released its idempotency key. Replay
// and purge work in chunks of kDeadChunk, each one operation, so a queue of a million dead jobs
// never holds the lock for long.
#include <spdlog/spdlog.h>

#include <unordered_set>

#include "core/errors.h"
#include "core/validate.h"
#include "store/embedded/engine_impl.h"

namespace delayq {
namespace {

constexpr size_t kDeadChunk = 1000;

}  // namespace

void EngineImpl::DeadTransitionLocked(QueueState* q, const Ulid& id, JobRecord* record, int32_t attempt, int64_t now_ms,
                                      WriteBatch& batch) {
  batch.Delete(Cf::kDue, DueIndexKey(q->name, DueKey{record->due_at_ms, id}));
  if (record->key_indexed) batch.Delete(Cf::kKeys, IdemKey(q->name, record->key));
  record->dead = true;
  record->key_indexed = false;  // a dead job releases its key
  record->attempt = attempt;
  record->dead_at_ms = now_ms;
  batch.Put(Cf::kJobs, id.Raw(), EncodeJobRecord(*record));
  batch.Put(Cf::kDead, DeadIndexKey(q->name, now_ms, id), "");
  spdlog::warn("{}", errors::DeadJobWarning(q->name, id.ToString(), attempt, record->last_error));
}

Result<int64_t> EngineImpl::ReplayDead(std::string_view queue, std::span<const std::string> ids) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  std::vector<Ulid> wanted;
  std::unordered_set<Ulid, UlidHash> listed;  // an id given twice is replayed (and counted) once
  for (size_t i = 0; i < ids.size(); ++i) {
    auto id = Ulid::Parse(ids[i]);
    if (!id) return errors::NotAJobId(fmt::format("ids[{}]", i), ids[i]);
    if (listed.insert(*id).second) wanted.push_back(*id);
  }
  int64_t replayed = 0;
  int64_t budget = -1;  // "all": at most the dead jobs there were when the replay began
  size_t next = 0;
  while (true) {
    bool more = false;
    Op op(*this, Op::kWrites);
    DELAYQ_RETURN_IF_ERROR(op.status());
    const int64_t now_ms = op.now().wall_ms();
    {
      QueueState* q = FindQueueLocked(queue);
      if (!q) return UnknownQueue(queue);
      if (budget < 0) budget = q->dead;
      // The chunk: dead jobs to replay, with their records.
      std::vector<std::pair<Ulid, JobRecord>> chunk;
      if (!wanted.empty()) {
        for (; next < wanted.size() && chunk.size() < kDeadChunk; ++next) {
          std::string raw;
          JobRecord record;
          Status s = storage_->Get(Cf::kJobs, wanted[next].Raw(), &raw);
          if (s.code() == Code::kNotFound) continue;
          DELAYQ_RETURN_IF_ERROR(s);
          DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(raw, &record));
          if (record.queue != q->name || !record.dead) continue;
          chunk.emplace_back(wanted[next], std::move(record));
        }
        more = next < wanted.size();
      } else {
        auto cursor = storage_->Scan(Cf::kDead, QueuePrefix(queue), QueuePrefixEnd(queue));
        for (; cursor->Valid() && chunk.size() < kDeadChunk && static_cast<int64_t>(chunk.size()) < budget;
             cursor->Next()) {
          std::string_view name;
          int64_t dead_at;
          Ulid id;
          std::string raw;
          JobRecord record;
          if (!ParseTimeIdKey(cursor->key(), &name, &dead_at, &id)) {
            return Status::Corruption("a dead-index entry of queue " + q->name + " is malformed");
          }
          DELAYQ_RETURN_IF_ERROR(storage_->Get(Cf::kJobs, id.Raw(), &raw));
          DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(raw, &record));
          chunk.emplace_back(id, std::move(record));
        }
        DELAYQ_RETURN_IF_ERROR(cursor->status());
        budget -= static_cast<int64_t>(chunk.size());
        more = budget > 0 && chunk.size() == kDeadChunk;
      }
      auto batch = storage_->NewBatch();
      std::unordered_set<std::string> claimed;
      for (auto& [id, record] : chunk) {
        batch->Delete(Cf::kDead, DeadIndexKey(queue, record.dead_at_ms, id));
        record.dead = false;
        record.attempt = 0;
        record.dead_at_ms = 0;
        record.due_at_ms = now_ms;
        // The job takes its key back unless a live job holds it now; then it comes back
        // without a key (a dead job released it), so no two live jobs show one key. The Lua
        // twin is kReplayScript.
        if (!record.key.empty()) {
          std::string holder;
          Status s = storage_->Get(Cf::kKeys, IdemKey(queue, record.key), &holder);
          if (!s.ok() && s.code() != Code::kNotFound) return s;
          const bool free = s.code() == Code::kNotFound || !HoldsKey(holder, now_ms);  // a kept key holds it too
          record.key_indexed = free && claimed.insert(record.key).second;
          if (record.key_indexed) {
            batch->Put(Cf::kKeys, IdemKey(queue, record.key), id.Raw());
          } else {
            record.key.clear();
          }
        }
        batch->Put(Cf::kJobs, id.Raw(), EncodeJobRecord(record));
        DueRecord due{now_ms, 0, {}, 0};
        due.priority = record.priority;
        due.group = record.group;
        batch->Put(Cf::kDue, DueIndexKey(queue, {now_ms, id}), EncodeDueRecord(due));
      }
      if (batch->Count() > 0) DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
      for (auto& [id, record] : chunk) {
        --q->dead;
        ++q->live;
        PlaceLocked(q, {now_ms, id}, 0, {}, false, op.now().wall_us, Lane{record.priority, record.group});
      }
      replayed += static_cast<int64_t>(chunk.size());
      ServeWaitersLocked(q, op.now(), op.deferred());
    }
    DELAYQ_RETURN_IF_ERROR(op.Finish());
    if (!more) break;
  }
  return replayed;
}

Result<int64_t> EngineImpl::PurgeDead(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  int64_t purged = 0;
  while (true) {
    size_t n = 0;
    Op op(*this, Op::kWrites);
    DELAYQ_RETURN_IF_ERROR(op.status());
    {
      QueueState* q = FindQueueLocked(queue);
      if (!q) return UnknownQueue(queue);
      auto cursor = storage_->Scan(Cf::kDead, QueuePrefix(queue), QueuePrefixEnd(queue));
      auto batch = storage_->NewBatch();
      for (; cursor->Valid() && n < kDeadChunk; cursor->Next(), ++n) {
        std::string_view name;
        int64_t dead_at;
        Ulid id;
        if (!ParseTimeIdKey(cursor->key(), &name, &dead_at, &id)) {
          return Status::Corruption("a dead-index entry of queue " + q->name + " is malformed");
        }
        batch->Delete(Cf::kJobs, id.Raw());
        batch->Delete(Cf::kDead, cursor->key());
      }
      DELAYQ_RETURN_IF_ERROR(cursor->status());
      if (n > 0) DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
      q->dead -= static_cast<int64_t>(n);
      purged += static_cast<int64_t>(n);
    }
    DELAYQ_RETURN_IF_ERROR(op.Finish());
    if (n < kDeadChunk) break;
  }
  return purged;
}

// Counts a job that went dead at dead_at_ms (after its write succeeded), and tells its waiters.
void EngineImpl::NoteDeathLocked(QueueState* q, const Ulid& id, int64_t dead_at_ms) {
  if (outcomes_.any()) outcomes_.Notify(q->name, id.ToString(), JobState::kDead);
  ++q->dead;
  ++q->counters.dead;
  if (dead_at_ms < q->dead_floor_ms) {
    q->dead_floor_ms = dead_at_ms;
    PlanSweepLocked(kDeadSet, q);
  }
}

}  // namespace delayq
