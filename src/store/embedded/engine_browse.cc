// Browsing: a queue's jobs in one state, a page at a time (Queue::ListJobs).
//
// Ready and reserved jobs are listed from memory (the ready set and the queue's leased set, both
// ordered by (due, id)); scheduled jobs from the due index on disk, which is ordered by due
// bucket, so a page reads whole buckets and sorts each (the same unit the window loads); dead
// jobs from the dead index, ordered by (dead_at, id), completed ones from the done index, by
// (completed_at, id). Every page holds the engine's lock while
// it runs, so it is bounded: at most the page's jobs, Limits::kMaxListBytes of their records, and
// for scheduled jobs about kScanBudget index entries (whole buckets) before it stops with a
// cursor.
#include <algorithm>

#include "core/page_cursor.h"
#include "core/validate.h"
#include "store/embedded/engine_impl.h"

namespace delayq {
namespace {

constexpr size_t kScanBudget = 5'000;

PageCursor At(int64_t ms, const Ulid& id) { return {ms, id.ToString()}; }

}  // namespace

// One page of a queue's jobs in one state, walked the way that state is kept.
class EngineImpl::Lister {
 public:
  Lister(EngineImpl& engine, QueueState* q, const ListRequest& request, std::optional<DueKey> after)
      : e_(engine), q_(q), request_(request), after_(after) {}
  Result<JobPage> InMemory();   // ready or reserved
  Result<JobPage> Dead();       // the dead index
  Result<JobPage> Completed();  // the done index
  Result<JobPage> Scheduled();  // the due index, a bucket at a time

 private:
  // Reads the job's record (from its due place `key` when it is live) and adds the job; false
  // when the page is full (by count or bytes) after it.
  Result<bool> Add(const Ulid& id, const DueKey* key);
  // Lists the collected bucket; false when the page is full.
  Result<bool> Flush(std::vector<DueKey>& bucket);
  void FinishAt(const PageCursor& at) { page_.next_cursor = EncodePageCursor(request_.state, at); }

  EngineImpl& e_;
  QueueState* q_;
  const ListRequest& request_;
  const std::optional<DueKey> after_;  // the page starts after it (exclusive); none: from the start
  JobPage page_;
  int64_t bytes_ = 0;
};

Result<bool> EngineImpl::Lister::Add(const Ulid& id, const DueKey* key) {
  std::string raw;
  JobRecord record;
  DELAYQ_RETURN_IF_ERROR(ReadRecord(*e_.storage_, q_->name, id, key, &record, nullptr, &raw));
  auto job = e_.JobViewLocked(q_, id, record);
  if (!job.ok()) return job.status();
  page_.jobs.push_back(std::move(*job));
  bytes_ += static_cast<int64_t>(raw.size());
  return static_cast<int32_t>(page_.jobs.size()) < request_.limit && bytes_ < Limits::kMaxListBytes;
}

Result<JobPage> EngineImpl::Lister::InMemory() {
  // The keys first: JobViewLocked and reads do not change the sets, but copying keeps the walk
  // independent of them.
  std::vector<DueKey> keys;
  auto collect = [&](const auto& set) {
    auto it = after_ ? set.upper_bound(*after_) : set.begin();
    for (; it != set.end() && static_cast<int32_t>(keys.size()) < request_.limit; ++it) {
      if constexpr (requires { it->first; }) {
        keys.push_back(it->first);
      } else {
        keys.push_back(*it);
      }
    }
    return it != set.end();
  };
  bool more = request_.state == JobState::kReady ? collect(q_->ready.map()) : collect(q_->leases.keys());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto room = Add(keys[i].id, &keys[i]);
    if (!room.ok()) return room.status();
    if (!*room && i + 1 < keys.size()) more = true;
    if (!*room) break;
  }
  if (more) FinishAt(At(keys[page_.jobs.size() - 1].due_ms, keys[page_.jobs.size() - 1].id));
  return std::move(page_);
}

Result<JobPage> EngineImpl::Lister::Dead() {
  const std::string start = after_ ? DeadIndexKey(q_->name, after_->due_ms, after_->id) : QueuePrefix(q_->name);
  auto cursor = e_.storage_->Scan(Cf::kDead, start, QueuePrefixEnd(q_->name));
  if (after_ && cursor->Valid() && cursor->key() == start) cursor->Next();
  for (; cursor->Valid(); cursor->Next()) {
    std::string_view name;
    int64_t dead_at;
    Ulid id;
    if (!ParseTimeIdKey(cursor->key(), &name, &dead_at, &id)) {
      return Status::Corruption("a dead-index entry of queue " + q_->name + " is malformed");
    }
    auto room = Add(id, nullptr);
    if (!room.ok()) return room.status();
    if (!*room) {
      cursor->Next();
      if (cursor->Valid()) FinishAt(At(dead_at, id));
      break;
    }
  }
  DELAYQ_RETURN_IF_ERROR(cursor->status());
  return std::move(page_);
}

Result<JobPage> EngineImpl::Lister::Completed() {
  const std::string end = DonePrefixEnd(q_->name);
  const std::string start = after_ ? DoneIndexKey(q_->name, after_->due_ms, after_->id) : DonePrefix(q_->name);
  auto cursor = e_.storage_->Scan(Cf::kMeta, start, end);
  if (after_ && cursor->Valid() && cursor->key() == start) cursor->Next();
  const size_t skip = DonePrefix("").size();
  for (; cursor->Valid(); cursor->Next()) {
    std::string_view name;
    int64_t completed_at;
    Ulid id;
    if (!ParseTimeIdKey(cursor->key().substr(skip), &name, &completed_at, &id)) {
      return Status::Corruption("a completed-index entry of queue " + q_->name + " is malformed");
    }
    std::string raw;
    JobRecord record;
    DELAYQ_RETURN_IF_ERROR(e_.storage_->Get(Cf::kJobs, CompletedJobKey(id), &raw));
    DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(raw, &record));
    auto job = e_.JobViewLocked(q_, id, record);
    if (!job.ok()) return job.status();
    page_.jobs.push_back(std::move(*job));
    bytes_ += static_cast<int64_t>(raw.size());
    if (static_cast<int32_t>(page_.jobs.size()) >= request_.limit || bytes_ >= Limits::kMaxListBytes) {
      cursor->Next();
      if (cursor->Valid()) FinishAt(At(completed_at, id));
      break;
    }
  }
  DELAYQ_RETURN_IF_ERROR(cursor->status());
  return std::move(page_);
}

Result<bool> EngineImpl::Lister::Flush(std::vector<DueKey>& bucket) {
  std::sort(bucket.begin(), bucket.end());
  for (const DueKey& key : bucket) {
    if (after_ && !(*after_ < key)) continue;
    auto room = Add(key.id, &key);
    if (!room.ok()) return room.status();
    if (!*room) {
      // More in this bucket, or maybe in later ones: the next page starts after this job.
      FinishAt(At(key.due_ms, key.id));
      return false;
    }
  }
  bucket.clear();
  return true;
}

// Whole buckets from the cursor's, each sorted by (due, id); only entries after the cursor. A
// cursor at the very end of a bucket (a page that stopped between buckets) starts at the next one,
// so that the bucket is not read again.
Result<JobPage> EngineImpl::Lister::Scheduled() {
  int64_t first_bucket = after_ ? DueBucket(after_->due_ms) : 0;
  if (after_ && after_->id == DueKey::Max().id && DueBucket(after_->due_ms + 1) != first_bucket) ++first_bucket;
  auto cursor = e_.storage_->Scan(Cf::kDue, DueBucketKey(q_->name, first_bucket), QueuePrefixEnd(q_->name));
  size_t scanned = 0;
  std::vector<DueKey> bucket;
  int64_t bucket_no = kNoBucket;
  for (; cursor->Valid(); cursor->Next()) {
    std::string_view name;
    int64_t b;
    Ulid id;
    DueRecord rec;
    if (!ParseTimeIdKey(cursor->key(), &name, &b, &id) || !DecodeDueRecord(cursor->value(), &rec).ok()) {
      return Status::Corruption("a due-index entry of queue " + q_->name + " is malformed");
    }
    if (b != bucket_no && bucket_no != kNoBucket) {
      auto room = Flush(bucket);
      if (!room.ok()) return room.status();
      if (!*room) return std::move(page_);
      if (scanned >= kScanBudget) {
        // Stop between buckets: the next page starts after every job of the last one.
        FinishAt(At(((bucket_no + 1) << kDueBucketShift) - 1, DueKey::Max().id));
        return std::move(page_);
      }
    }
    bucket_no = b;
    const DueKey key{rec.due_ms, id};
    if (after_ && !(*after_ < key)) continue;  // before the cursor: not this page's work
    ++scanned;
    // Ready and reserved jobs are in the due index too (as in RefillLocked).
    if (rec.lease_deadline_ms != 0 || e_.leases_.contains(id) || q_->ready.contains(key)) continue;
    bucket.push_back(key);
  }
  DELAYQ_RETURN_IF_ERROR(cursor->status());
  auto room = Flush(bucket);
  if (!room.ok()) return room.status();
  // A full last page may have been the end; the next one is then empty, which is correct.
  return std::move(page_);
}

Result<JobPage> EngineImpl::ListJobs(std::string_view queue, const ListRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateListRequest(request));
  std::optional<DueKey> after;
  if (!request.cursor.empty()) {
    auto at = DecodePageCursor(request.cursor, request.state);
    if (!at.ok()) return at.status();
    auto id = Ulid::Parse(at->tail);
    if (!id) return BadPageCursor(request.cursor);
    after = DueKey{at->ms, *id};
  }
  Op op(*this, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);
  if (!q) return UnknownQueue(queue);
  Lister lister(*this, q, request, after);
  switch (request.state) {
    case JobState::kReady:
    case JobState::kReserved: return lister.InMemory();
    case JobState::kDead: return lister.Dead();
    case JobState::kCompleted: return lister.Completed();
    case JobState::kScheduled: return lister.Scheduled();
    case JobState::kCancelled: break;  // refused by ValidateListRequest
  }
  return JobPage{};
}

}  // namespace delayq
