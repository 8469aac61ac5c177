// Completed jobs kept (QueueConfig::keep_completed_ms): an ack keeps the job, with its result, for
// that long after it, then the sweep deletes it, by the dead jobs' rule (engine_sweeps.cc).
//
// A completed job is never live: its record moves to `jobs` under CompletedJobKey (keys.h), beside
// the live records' ids rather than at one, so no read of a live job (by receipt, by key, by the
// scheduler) can meet it; one entry in meta's "done" index (queue | completed_at | id) lists and
// sweeps it. Its key was released at the ack, as without keeping (kept_keys.h); while a kept key
// (key_ttl_ms) still names it, the job is found by that key too.
#include "core/errors.h"
#include "core/mutant.h"
#include "store/embedded/engine_impl.h"

namespace delayq {

Status EngineImpl::PutCompletedLocked(QueueState* q, const ReceiptTarget& t, JobRecord& record,
                                      const std::optional<std::string>& result, int64_t now_ms, WriteBatch& batch) {
  // The record as it stands (a leased job's may not have been read for its receipt).
  DELAYQ_RETURN_IF_ERROR(ReadRecord(*storage_, q->name, t.id, &t.key, &record));
  record.completed = true;
  record.dead = false;
  record.key_indexed = false;  // released by the ack (PutAck)
  record.attempt = t.attempt;
  record.completed_at_ms = now_ms;
  record.result = result.value_or("");
  if (MutantStrikes("result-of-another", 10)) record.result = R"({"c":0,"n":0})";  // core/mutant.h
  batch.Put(Cf::kJobs, CompletedJobKey(t.id), EncodeJobRecord(record));
  batch.Put(Cf::kMeta, DoneIndexKey(q->name, now_ms, t.id), "");
  return Status::Ok();
}

// Counts a job completed at completed_at_ms (after its write succeeded), and tells its waiters.
void EngineImpl::NoteCompletedLocked(QueueState* q, const Ulid& id, int64_t completed_at_ms) {
  if (outcomes_.any()) outcomes_.Notify(q->name, id.ToString(), JobState::kCompleted);
  ++q->completed;
  if (completed_at_ms < q->completed_floor_ms) {
    q->completed_floor_ms = completed_at_ms;
    PlanSweepLocked(kCompletedSet, q);
  }
}

Status EngineImpl::ResolveCompletedLocked(QueueState* q, const JobRef& ref, Ulid* id, JobRecord* record) {
  if (!ref.id.empty()) {
    auto parsed = Ulid::Parse(ref.id);
    if (!parsed) return errors::NotAJobId("id", ref.id);
    *id = *parsed;
  } else {
    // A kept key: id(16) due(be64) expiry(be64), naming the job that finished with it.
    std::string raw;
    Status s = storage_->Get(Cf::kKeys, IdemKey(q->name, ref.key), &raw);
    if (s.code() == Code::kNotFound || raw.size() <= 16 || !HoldsKey(raw, NowLocked().wall_ms())) {
      return errors::NoJobWithKey(q->name, ref.key);
    }
    DELAYQ_RETURN_IF_ERROR(s);
    *id = Ulid::FromRaw(std::string_view(raw).substr(0, 16));
  }
  std::string raw;
  Status s = storage_->Get(Cf::kJobs, CompletedJobKey(*id), &raw);
  if (s.code() == Code::kNotFound) {
    return ref.id.empty() ? errors::NoJobWithKey(q->name, ref.key) : errors::NoSuchJob(q->name, id->ToString());
  }
  DELAYQ_RETURN_IF_ERROR(s);
  DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(raw, record));
  if (record->queue != q->name || !record->completed) return errors::NoSuchJob(q->name, id->ToString());
  return Status::Ok();
}

Status EngineImpl::DeleteCompletedLocked(Op& op, QueueState* q, const Ulid& id, const JobRecord& record) {
  auto batch = storage_->NewBatch();
  batch->Delete(Cf::kJobs, CompletedJobKey(id));
  batch->Delete(Cf::kMeta, DoneIndexKey(q->name, record.completed_at_ms, id));
  DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
  --q->completed;
  return Status::Ok();
}

}  // namespace delayq
