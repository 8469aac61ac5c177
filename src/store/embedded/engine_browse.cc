// Browsing: a queue's jobs in one state, a page at a time (Queue::ListJobs).
//
// Ready and reserved jobs are listed from memory (the ready set and the queue's leased set, both
// ordered by (due, id)); scheduled jobs from the due index on disk, which is ordered by due
// bucket, so a page reads whole buckets and sorts each (the same unit the window loads); dead
// jobs from the dead index, ordered by (dead_at, id). Every page holds the engine's lock while
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

Result<JobPage> EngineImpl::ListJobs(std::string_view queue, const ListRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateListRequest(request));
  // After `after` (exclusive); nothing given: from the start.
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

  JobPage page;
  int64_t bytes = 0;
  // Adds the job; false when the page is full (by count or bytes) after it.
  auto add = [&](const Ulid& id, std::string_view raw, const JobRecord& record) -> Result<bool> {
    auto job = JobViewLocked(q, id, record);
    if (!job.ok()) return job.status();
    page.jobs.push_back(std::move(*job));
    bytes += static_cast<int64_t>(raw.size());
    return static_cast<int32_t>(page.jobs.size()) < request.limit && bytes < Limits::kMaxListBytes;
  };
  // The record of a job of `q`, read from disk (from its due place when it is live).
  auto read = [&](const Ulid& id, std::string* raw, JobRecord* record, const DueKey* key = nullptr) -> Status {
    return ReadRecord(*storage_, q->name, id, key, record, nullptr, raw);
  };
  auto finish_at = [&](const PageCursor& at) { page.next_cursor = EncodePageCursor(request.state, at); };

  switch (request.state) {
    case JobState::kReady:
    case JobState::kReserved: {
      // The ids first: JobViewLocked and reads do not change the sets, but copying keeps the
      // walk independent of them.
      std::vector<DueKey> keys;
      auto collect = [&](const auto& set) {
        auto it = after ? set.upper_bound(*after) : set.begin();
        for (; it != set.end() && static_cast<int32_t>(keys.size()) < request.limit; ++it) {
          if constexpr (requires { it->first; }) {
            keys.push_back(it->first);
          } else {
            keys.push_back(*it);
          }
        }
        return it != set.end();
      };
      bool more = request.state == JobState::kReady ? collect(q->ready.map()) : collect(q->leases.keys());
      for (size_t i = 0; i < keys.size(); ++i) {
        std::string raw;
        JobRecord record;
        DELAYQ_RETURN_IF_ERROR(read(keys[i].id, &raw, &record, &keys[i]));
        auto room = add(keys[i].id, raw, record);
        if (!room.ok()) return room.status();
        if (!*room && i + 1 < keys.size()) more = true;
        if (!*room) break;
      }
      if (more) finish_at(At(keys[page.jobs.size() - 1].due_ms, keys[page.jobs.size() - 1].id));
      return page;
    }
    case JobState::kDead: {
      const std::string start = after ? DeadIndexKey(q->name, after->due_ms, after->id) : QueuePrefix(q->name);
      auto cursor = storage_->Scan(Cf::kDead, start, QueuePrefixEnd(q->name));
      if (after && cursor->Valid() && cursor->key() == start) cursor->Next();
      for (; cursor->Valid(); cursor->Next()) {
        std::string_view name;
        int64_t dead_at;
        Ulid id;
        if (!ParseTimeIdKey(cursor->key(), &name, &dead_at, &id)) {
          return Status::Corruption("a dead-index entry of queue " + q->name + " is malformed");
        }
        std::string raw;
        JobRecord record;
        DELAYQ_RETURN_IF_ERROR(read(id, &raw, &record));
        auto room = add(id, raw, record);
        if (!room.ok()) return room.status();
        if (!*room) {
          cursor->Next();
          if (cursor->Valid()) finish_at(At(dead_at, id));
          break;
        }
      }
      DELAYQ_RETURN_IF_ERROR(cursor->status());
      return page;
    }
    case JobState::kScheduled: {
      // Whole buckets from the cursor's, each sorted by (due, id); only entries after the cursor.
      // A cursor at the very end of a bucket (a page that stopped between buckets) starts at the
      // next one, so that the bucket is not read again.
      int64_t first_bucket = after ? DueBucket(after->due_ms) : 0;
      if (after && after->id == DueKey::Max().id && DueBucket(after->due_ms + 1) != first_bucket) ++first_bucket;
      auto cursor = storage_->Scan(Cf::kDue, DueBucketKey(q->name, first_bucket), QueuePrefixEnd(q->name));
      size_t scanned = 0;
      std::vector<DueKey> bucket;
      int64_t bucket_no = kNoBucket;
      // Lists the collected bucket; false when the page is full.
      auto flush = [&]() -> Result<bool> {
        std::sort(bucket.begin(), bucket.end());
        for (size_t i = 0; i < bucket.size(); ++i) {
          const DueKey& key = bucket[i];
          if (after && !(*after < key)) continue;
          std::string raw;
          JobRecord record;
          DELAYQ_RETURN_IF_ERROR(read(key.id, &raw, &record, &key));
          auto room = add(key.id, raw, record);
          if (!room.ok()) return room.status();
          if (!*room) {
            // More in this bucket, or maybe in later ones: the next page starts after this job.
            finish_at(At(key.due_ms, key.id));
            return false;
          }
        }
        bucket.clear();
        return true;
      };
      for (; cursor->Valid(); cursor->Next()) {
        std::string_view name;
        int64_t b;
        Ulid id;
        DueRecord rec;
        if (!ParseTimeIdKey(cursor->key(), &name, &b, &id) || !DecodeDueRecord(cursor->value(), &rec).ok()) {
          return Status::Corruption("a due-index entry of queue " + q->name + " is malformed");
        }
        if (b != bucket_no) {
          if (bucket_no != kNoBucket) {
            auto room = flush();
            if (!room.ok()) return room.status();
            if (!*room) return page;
            if (scanned >= kScanBudget) {
              // Stop between buckets: the next page starts after every job of the last one.
              finish_at(At(((bucket_no + 1) << kDueBucketShift) - 1, DueKey::Max().id));
              return page;
            }
          }
          bucket_no = b;
        }
        const DueKey key{rec.due_ms, id};
        if (after && !(*after < key)) continue;  // before the cursor: not this page's work
        ++scanned;
        // Ready and reserved jobs are in the due index too (as in RefillLocked).
        if (rec.lease_deadline_ms != 0 || leases_.contains(id) || q->ready.contains(key)) continue;
        bucket.push_back(key);
      }
      DELAYQ_RETURN_IF_ERROR(cursor->status());
      auto room = flush();
      if (!room.ok()) return room.status();
      // A full last page may have been the end; the next one is then empty, which is correct.
      return page;
    }
  }
  return page;
}

}  // namespace delayq
