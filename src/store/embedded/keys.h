// Key layouts of the embedded store's column families (see docs/architecture.md).
//
//   jobs  id(16)                                   -> JobRecord
//   due   queue \0 bucket(be64) id(16)             -> DueRecord   every live job
//   dead  queue \0 dead_at_ms(be64) id(16)         -> ""          every dead job
//   keys  queue \0 idempotency-key                 -> id(16)      live jobs with a key
//                                                  or id(16) due(be64) expiry(be64): a key kept
//                                                  taken after its job was done (key_ttl_ms)
//   meta  "queue" \0 queue                         -> QueueMeta   stored config, paused flag
//   meta  "keyttl" \0 expiry(be64) queue \0 key    -> ""          when each kept key is free
//   jobs  id(16) 'c'                               -> JobRecord   a completed job (version 4)
//   meta  "done" \0 queue \0 completed_at(be64) id(16) -> ""      every completed job
//   meta  "sched" \0 queue \0 name                 -> generation(be64) + schedule record
//                                                  (schedule/schedule_store.h)
//
// One row per scheduled job. A job is made with an id tagged with its first due bucket (the
// id's last 4 bytes: UlidGenerator::NextTagged), and while it stays in that bucket (until a
// nack, reschedule, replace or replay moves it) its record is inline in its due entry
// (DueRecord version 3) and `jobs` holds no row for it: an enqueue writes one row, an ack
// deletes one. A job that moves, one whose record is larger than kInlineRecordMaxBytes (a
// reserve rewrites the entry) and every job of a release before this layout have their record
// in `jobs` and a version 2 due entry. So: a job's record is in `jobs` if it has a row there;
// else inline in the due entry at its id's place. Dead jobs' records are always in `jobs`.
//
// Queue names never contain \0, so "queue \0" is an exact per-queue prefix, and big-endian
// times make byte order equal time order.
//
// The due index is ordered by due *bucket* (due_ms >> kDueBucketShift, about 4 s), then id;
// the exact due time is in the DueRecord. Within a bucket ids only grow, so RocksDB inserts
// new entries next to the previous one of the same bucket (see the insert-hint prefix in
// rocksdb_storage.cc), which is about twice as fast as inserting at random due times. The
// window therefore loads and drops whole buckets and sorts them by (due, id) in memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/bytes.h"
#include "core/ulid.h"
#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {

// A position in a queue's due index: ordered by due time, then id (creation order).
struct DueKey {
  int64_t due_ms = 0;
  Ulid id;
  auto operator<=>(const DueKey&) const = default;
  bool operator==(const DueKey&) const = default;
  static DueKey Max() {
    DueKey k{INT64_MAX, {}};
    k.id.bytes.fill(0xff);
    return k;
  }
};

inline std::string QueuePrefix(std::string_view queue) {
  std::string k(queue);
  k.push_back('\0');
  return k;
}
// The end of a queue's key range (exclusive upper bound for scans).
inline std::string QueuePrefixEnd(std::string_view queue) {
  std::string k(queue);
  k.push_back('\1');
  return k;
}

inline std::string TimeIdKey(std::string_view queue, int64_t ms, const Ulid& id) {
  std::string k = QueuePrefix(queue);
  k.reserve(k.size() + 24);
  PutBigEndian64(&k, static_cast<uint64_t>(ms));
  k.append(id.Raw());
  return k;
}

inline constexpr int kDueBucketShift = 12;
inline constexpr int64_t kNoBucket = INT64_MAX;
inline int64_t DueBucket(int64_t due_ms) { return due_ms >> kDueBucketShift; }

// Records larger than this stay in `jobs`: a reserve or touch rewrites an inline record whole.
inline constexpr size_t kInlineRecordMaxBytes = 4096;
// The tag of an id whose job has no due bucket that fits in 32 bits (never a bucket).
inline constexpr uint32_t kNoBucketTag = 0xffffffffu;
inline uint32_t BucketTag(int64_t due_ms) {
  const int64_t bucket = DueBucket(due_ms);
  return bucket >= 0 && bucket < kNoBucketTag ? static_cast<uint32_t>(bucket) : kNoBucketTag;
}
inline uint32_t IdTag(const Ulid& id) {
  return (uint32_t{id.bytes[12]} << 24) | (uint32_t{id.bytes[13]} << 16) | (uint32_t{id.bytes[14]} << 8) | id.bytes[15];
}
// Whether `key` is the place its id is tagged with: the only place its record can be inline.
inline bool AtIdPlace(const DueKey& key) {
  const uint32_t tag = IdTag(key.id);
  return tag != kNoBucketTag && tag == DueBucket(key.due_ms);
}
// The due-index key of the place `id` is tagged with (a moment in its bucket: only the bucket
// is in the key).
inline DueKey IdPlace(const Ulid& id) { return {static_cast<int64_t>(IdTag(id)) << kDueBucketShift, id}; }

inline std::string DueIndexKey(std::string_view queue, const DueKey& key) {
  return TimeIdKey(queue, DueBucket(key.due_ms), key.id);
}
// The first possible due-index key of `bucket`.
inline std::string DueBucketKey(std::string_view queue, int64_t bucket) {
  std::string k = QueuePrefix(queue);
  PutBigEndian64(&k, static_cast<uint64_t>(bucket));
  return k;
}
inline std::string DeadIndexKey(std::string_view queue, int64_t dead_at_ms, const Ulid& id) {
  return TimeIdKey(queue, dead_at_ms, id);
}
// A completed job's record: beside the live records' ids, never one of them, so no read of a live
// job (all by the 16-byte id) can find a completed one.
inline std::string CompletedJobKey(const Ulid& id) {
  std::string k(id.Raw());
  k.push_back('c');
  return k;
}
// A kind of meta row ("done", "sched"): one queue's rows of it (all of them for an empty queue)
// lie in [MetaPrefix, MetaPrefixEnd).
inline std::string MetaPrefix(std::string_view kind, std::string_view queue) {
  std::string k(kind);
  k.push_back('\0');
  if (!queue.empty()) {
    k.append(queue);
    k.push_back('\0');
  }
  return k;
}
inline std::string MetaPrefixEnd(std::string_view kind, std::string_view queue) {
  std::string k = MetaPrefix(kind, queue);
  k.back() = '\x01';
  return k;
}
// The completed jobs, by (completed_at, id).
inline std::string DonePrefix(std::string_view queue) { return MetaPrefix("done", queue); }
inline std::string DonePrefixEnd(std::string_view queue) { return MetaPrefixEnd("done", queue); }
inline std::string DoneIndexKey(std::string_view queue, int64_t completed_at_ms, const Ulid& id) {
  return DonePrefix("") + TimeIdKey(queue, completed_at_ms, id);
}
inline std::string IdemKey(std::string_view queue, std::string_view key) {
  std::string k = QueuePrefix(queue);
  k.append(key);
  return k;
}
// The rows of schedules.
inline std::string SchedulePrefix(std::string_view queue) { return MetaPrefix("sched", queue); }
inline std::string SchedulePrefixEnd(std::string_view queue) { return MetaPrefixEnd("sched", queue); }
inline std::string ScheduleKey(std::string_view queue, std::string_view name) {
  std::string k = SchedulePrefix(queue);
  k.append(name);
  return k;
}
inline std::string MetaQueueKey(std::string_view queue) {
  std::string k("queue");
  k.push_back('\0');
  k.append(queue);
  return k;
}

// Splits a due/dead index key into its parts (for the due index, `ms` is the bucket); false
// when malformed.
inline bool ParseTimeIdKey(std::string_view k, std::string_view* queue, int64_t* ms, Ulid* id) {
  size_t nul = k.find('\0');
  if (nul == std::string_view::npos || k.size() != nul + 1 + 24) return false;
  *queue = k.substr(0, nul);
  *ms = static_cast<int64_t>(GetBigEndian64(k.substr(nul + 1, 8)));
  *id = Ulid::FromRaw(k.substr(nul + 9, 16));
  return true;
}

// A key kept taken after its job was done (EnqueueRequest::key_ttl_ms): the value of its keys
// entry. A live job's entry is its 16-byte id; a kept key's is 32 bytes.
struct KeptKey {
  Ulid id;  // the job that was done
  int64_t due_ms = 0;
  int64_t expiry_ms = 0;  // free from this moment
};
inline constexpr size_t kKeptKeySize = 32;
inline std::string EncodeKeptKey(const KeptKey& k) {
  std::string v(k.id.Raw());
  PutBigEndian64(&v, static_cast<uint64_t>(k.due_ms));
  PutBigEndian64(&v, static_cast<uint64_t>(k.expiry_ms));
  return v;
}
inline bool DecodeKeptKey(std::string_view v, KeptKey* k) {
  if (v.size() != kKeptKeySize) return false;
  k->id = Ulid::FromRaw(v.substr(0, 16));
  k->due_ms = static_cast<int64_t>(GetBigEndian64(v.substr(16, 8)));
  k->expiry_ms = static_cast<int64_t>(GetBigEndian64(v.substr(24, 8)));
  return true;
}
// The meta entry that says when a kept key is free, ordered by that time.
inline std::string KeptKeyPrefix() { return std::string("keyttl\0", 7); }
inline std::string KeptKeyIndex(int64_t expiry_ms, std::string_view queue, std::string_view key) {
  std::string k = KeptKeyPrefix();
  PutBigEndian64(&k, static_cast<uint64_t>(expiry_ms));
  k.append(queue);
  k.push_back('\0');
  k.append(key);
  return k;
}

// The stored per-queue settings.
struct QueueMeta {
  QueueConfig config;
  bool has_config = false;  // false: the engine's default config applies
  bool paused = false;
};
std::string EncodeQueueMeta(const QueueMeta& meta);
Status DecodeQueueMeta(std::string_view data, QueueMeta* meta);

}  // namespace delayq
