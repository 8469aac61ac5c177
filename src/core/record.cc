#include "core/record.h"

#include <fmt/format.h>

#include "core/bytes.h"

namespace delayq {

JobRecord NewJobRecord(std::string_view queue, const EnqueueRequest& r, const QueueConfig& config, int64_t now_ms) {
  JobRecord record;
  record.queue = std::string(queue);
  record.key = r.key;
  record.created_at_ms = now_ms;
  record.max_attempts = r.max_attempts.value_or(config.max_attempts);
  record.headers = r.headers;
  record.payload = r.payload;
  record.binary = r.binary;
  record.key_ttl_ms = r.key_ttl_ms;
  record.priority = r.priority;
  record.group = r.group;
  return record;
}

void ApplyReplace(JobRecord& record, const EnqueueRequest& r, int64_t due_ms) {
  record.payload = r.payload;
  record.binary = r.binary;
  record.headers = r.headers;
  record.due_at_ms = due_ms;
  if (r.max_attempts) record.max_attempts = *r.max_attempts;
  record.key_ttl_ms = r.key_ttl_ms;
  record.priority = r.priority;
  record.group = r.group;
  record.attempt = 0;
}
namespace {

Status VersionError(const char* what, uint8_t version, uint8_t known) {
  if (version > known) {
    return Status::Corruption(
        fmt::format("{} record has format version {}, newer than this delayq understands ({}); "
                    "run the delayq version that wrote it",
                    what, version, known));
  }
  return Status::Corruption(fmt::format("{} record has unknown format version {}", what, version));
}

Status Truncated(const char* what) {
  return Status::Corruption(fmt::format("{} record is truncated or malformed", what));
}

}  // namespace

std::string EncodeJobRecord(const JobRecord& r) {
  std::string out;
  out.reserve(64 + r.queue.size() + r.key.size() + r.payload.size() + r.last_error.size());
  ByteWriter w(&out);
  const bool laned = r.priority != 0 || !r.group.empty() || r.completed;
  w.U8(r.completed ? 4 : laned ? 3 : r.key_ttl_ms > 0 ? 2 : 1);
  w.U8(r.completed ? 2 : r.dead ? 1 : 0);
  w.U8((r.key_indexed ? 1 : 0) | (r.binary ? 2 : 0));
  w.Varint(static_cast<uint64_t>(r.due_at_ms));
  w.Varint(static_cast<uint64_t>(r.created_at_ms));
  w.Varint(static_cast<uint64_t>(r.max_attempts));
  w.Varint(static_cast<uint64_t>(r.attempt));
  w.Varint(static_cast<uint64_t>(r.dead_at_ms));
  w.Bytes(r.queue);
  w.Bytes(r.key);
  w.Bytes(r.last_error);
  w.Varint(r.headers.size());
  for (const auto& [name, value] : r.headers) {
    w.Bytes(name);
    w.Bytes(value);
  }
  w.Bytes(r.payload);
  if (r.key_ttl_ms > 0 || laned) w.Varint(static_cast<uint64_t>(r.key_ttl_ms));
  if (laned) {
    w.U8(static_cast<uint8_t>(r.priority));
    w.Bytes(r.group);
  }
  if (r.completed) {
    w.Varint(static_cast<uint64_t>(r.completed_at_ms));
    w.Bytes(r.result);
  }
  return out;
}

Status DecodeJobRecord(std::string_view data, JobRecord* r) {
  ByteReader in(data);
  uint8_t version, state, flags;
  if (!in.U8(&version)) return Truncated("job");
  if (version < 1 || version > kRecordVersion) return VersionError("job", version, kRecordVersion);
  uint64_t due, created, max_attempts, attempt, dead_at, header_count;
  if (!in.U8(&state) || !in.U8(&flags) || !in.Varint(&due) || !in.Varint(&created) || !in.Varint(&max_attempts) ||
      !in.Varint(&attempt) || !in.Varint(&dead_at) || !in.Bytes(&r->queue) || !in.Bytes(&r->key) ||
      !in.Bytes(&r->last_error) || !in.Varint(&header_count) || header_count > Limits::kMaxHeaders) {
    return Truncated("job");
  }
  if (state > 2 || (state == 2) != (version >= 4)) return Truncated("job");
  r->dead = state == 1;
  r->completed = state == 2;
  r->key_indexed = (flags & 1) != 0;
  r->binary = (flags & 2) != 0;
  r->due_at_ms = static_cast<int64_t>(due);
  r->created_at_ms = static_cast<int64_t>(created);
  r->max_attempts = static_cast<int32_t>(max_attempts);
  r->attempt = static_cast<int32_t>(attempt);
  r->dead_at_ms = static_cast<int64_t>(dead_at);
  r->headers.clear();
  for (uint64_t i = 0; i < header_count; ++i) {
    std::string name, value;
    if (!in.Bytes(&name) || !in.Bytes(&value)) return Truncated("job");
    r->headers.emplace(std::move(name), std::move(value));
  }
  if (!in.Bytes(&r->payload)) return Truncated("job");
  uint64_t key_ttl = 0;
  if (version >= 2 && !in.Varint(&key_ttl)) return Truncated("job");
  uint8_t priority = 0;
  r->group.clear();
  if (version >= 3 && (!in.U8(&priority) || priority > Limits::kMaxPriority || !in.Bytes(&r->group))) {
    return Truncated("job");
  }
  uint64_t completed_at = 0;
  r->result.clear();
  if (version >= 4 && (!in.Varint(&completed_at) || !in.Bytes(&r->result))) return Truncated("job");
  if (!in.empty()) return Truncated("job");
  r->completed_at_ms = static_cast<int64_t>(completed_at);
  r->key_ttl_ms = static_cast<int64_t>(key_ttl);
  r->priority = priority;
  return Status::Ok();
}

std::string EncodeDueRecord(const DueRecord& r) {
  std::string out;
  out.reserve(32 + r.record.size());
  ByteWriter w(&out);
  const bool progress = !r.progress.empty();
  const bool laned = progress || r.priority != 0 || !r.group.empty();
  const bool inline_record = !r.record.empty();
  w.U8(progress ? (inline_record ? 7 : 6) : laned ? (inline_record ? 5 : 4) : (inline_record ? 3 : 2));
  w.Varint(static_cast<uint64_t>(r.due_ms));
  w.Varint(static_cast<uint64_t>(r.attempt));
  w.Fixed64(r.delivery.lo);
  w.Varint(static_cast<uint64_t>(r.lease_deadline_ms));
  w.Fixed64(r.delivery.hi);
  if (laned) {
    w.U8(static_cast<uint8_t>(r.priority));
    w.Bytes(r.group);
  }
  if (progress) w.Bytes(r.progress);
  out.append(r.record);
  return out;
}

Status DecodeDueRecord(std::string_view data, DueRecord* r) {
  ByteReader in(data);
  uint8_t version;
  if (!in.U8(&version)) return Truncated("due");
  if (version < 1 || version > kDueRecordVersion) return VersionError("due", version, kDueRecordVersion);
  uint64_t due, attempt, lease;
  r->delivery = {};
  if (!in.Varint(&due) || !in.Varint(&attempt) || !in.Fixed64(&r->delivery.lo) || !in.Varint(&lease)) {
    return Truncated("due");
  }
  if (version >= 2 && !in.Fixed64(&r->delivery.hi)) return Truncated("due");
  r->record = {};
  r->priority = 0;
  r->group = {};
  r->progress = {};
  if (version >= 4) {
    uint8_t priority;
    if (!in.U8(&priority) || priority > Limits::kMaxPriority || !in.Bytes(&r->group)) return Truncated("due");
    r->priority = priority;
  }
  if (version >= 6 && (!in.Bytes(&r->progress) || r->progress.empty())) return Truncated("due");
  if (version == 3 || version == 5 || version == 7) {
    if (in.empty()) return Truncated("due");  // a version 3 entry always holds a record
    r->record = in.rest();
  } else if (!in.empty()) {
    return Truncated("due");
  }
  r->due_ms = static_cast<int64_t>(due);
  r->attempt = static_cast<int32_t>(attempt);
  r->lease_deadline_ms = static_cast<int64_t>(lease);
  return Status::Ok();
}

}  // namespace delayq
