// The stored form of a job, shared by every store that keeps jobs as byte strings.
//
// Record format (byte 0 is the version):
//   JobRecord: u8 version=1, u8 state, u8 flags (bit 0: key_indexed, bit 1: binary),
//              varint due_at_ms, varint created_at_ms, varint max_attempts, varint attempt,
//              varint dead_at_ms, bytes queue, bytes key, bytes last_error,
//              varint header_count, (bytes name, bytes value)*, bytes payload
//   JobRecord version 2: version 1, then varint key_ttl_ms. Written only for a job with a
//              key_ttl_ms, so the records of every other job stay version 1 (an older delayq
//              still reads them).
//   DueRecord: u8 version=2, varint due_ms, varint attempt, fixed64 delivery (low half),
//              varint lease_deadline_ms, fixed64 delivery (high half)
//   DueRecord version 1 (read, no longer written): the same without the high half (a 64-bit
//              token; its receipts stay valid).
//   DueRecord version 3: version 2's fields, then the job's whole JobRecord (its own version
//              byte first) to the end of the value: a job kept in one row (see
//              store/embedded/keys.h). Version 2 is still written for a job whose record is
//              in `jobs`, so a reserve of such a job rewrites a few bytes.
//   JobRecord version 3: version 2, then u8 priority, bytes group. Written only for a job with a
//              priority or a group (EnqueueRequest), so other jobs' records stay as before.
//   DueRecord versions 4 and 5: versions 2 and 3 with u8 priority, bytes group after the
//              delivery's high half (before the record, in 5). Written only for a job with a
//              priority or a group: the scheduler needs them when the job comes due.
//   JobRecord version 4: version 3, then varint completed_at_ms, bytes result (empty: none). Written
//              only for a completed job (state 2), kept after its ack (keep_completed_ms).
//   DueRecord versions 6 and 7: versions 4 and 5 with bytes progress after the group (before
//              the record, in 7). Written only for a reserved job whose delivery reported its
//              progress (TouchRequest), so every other entry stays as before.
//   (bytes = varint length + raw bytes; varints are LEB128.)
//
// How to change the format safely:
//   1. Never change the meaning of an existing version. Add kRecordVersion + 1 and write it.
//   2. Keep decoding every older version (a branch per version in Decode*), filling new fields
//      with defaults, so data written by an older delayq opens without a migration.
//   3. A decoder refuses versions newer than it knows with kCorruption naming both versions,
//      so an older delayq never misreads newer data; downgrades are not supported.
//   4. Add a test in tests/core/record_test.cc that decodes a byte string written by each
//      older version (the bytes, not the encoder, so the test pins the old format).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/delivery_token.h"
#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {

inline constexpr uint8_t kRecordVersion = 4;     // JobRecord (1 to 3 for a job not completed)
inline constexpr uint8_t kDueRecordVersion = 7;  // DueRecord (2 to 6: see above)

struct JobRecord {
  std::string queue;
  std::string key;
  bool key_indexed = false;  // the key index points at this job (it owns its key)
  bool dead = false;         // false: waiting (scheduled/ready/reserved: see DueRecord) or completed
  bool completed = false;    // acked and kept (QueueConfig::keep_completed_ms)
  bool binary = false;       // the payload is opaque bytes rather than JSON text
  int64_t due_at_ms = 0;
  int64_t created_at_ms = 0;
  int32_t max_attempts = 0;
  int32_t attempt = 0;  // for dead jobs; a live job's attempt is in its DueRecord
  int64_t dead_at_ms = 0;
  std::string last_error;
  Headers headers;
  std::string payload;
  int64_t key_ttl_ms = 0;       // EnqueueRequest::key_ttl_ms
  int32_t priority = 0;         // EnqueueRequest::priority
  std::string group;            // EnqueueRequest::group
  int64_t completed_at_ms = 0;  // when completed
  std::string result;           // when completed: AckRequest::result (empty: none)
};

// The per-delivery state of a live job, kept beside its due-index entry so that a reserve
// rewrites a few bytes, not the whole record.
struct DueRecord {
  int64_t due_ms = 0;
  int32_t attempt = 0;
  DeliveryToken delivery;         // token of the current delivery; empty = never delivered
  int64_t lease_deadline_ms = 0;  // 0 = not reserved
  // Versions 4 and 5: the job's priority and group (a view into the decoded bytes).
  int32_t priority = 0;
  std::string_view group;
  // Versions 6 and 7: the current delivery's progress, JSON text (a view into the decoded bytes;
  // empty: none).
  std::string_view progress;
  // Version 3: the job's encoded JobRecord, a view into the decoded bytes (empty: the record
  // is elsewhere).
  std::string_view record;
};

// A new job's record, as every store makes it from the request: its content, key and lane, and
// max_attempts from the request or else the queue's config (copied at enqueue). The store sets
// what only it knows (the embedded store: due_at_ms and key_indexed; Redis: its meta).
JobRecord NewJobRecord(std::string_view queue, const EnqueueRequest& r, const QueueConfig& config, int64_t now_ms);
// A live job replaced (or debounced) by a request with its key: the new content, due at `due_ms`;
// max_attempts only when the request names one; its attempts start again. The Lua twin is the
// enqueue script's replace.
void ApplyReplace(JobRecord& record, const EnqueueRequest& r, int64_t due_ms);

std::string EncodeJobRecord(const JobRecord& record);
Status DecodeJobRecord(std::string_view data, JobRecord* record);
// Version 3 with `r.record` appended when it is not empty, else version 2.
std::string EncodeDueRecord(const DueRecord& r);
Status DecodeDueRecord(std::string_view data, DueRecord* record);

}  // namespace delayq
