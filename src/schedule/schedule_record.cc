// The stored form of a schedule (schedule_store.h describes the bytes).
#include <fmt/format.h>

#include "core/bytes.h"
#include "core/random.h"
#include "schedule/schedule_store.h"

namespace delayq {
namespace {

// Version 2 adds the runs' priority and group after the pending runs; a schedule without either
// is still written as version 1, which a delayq from before reads.
constexpr uint8_t kScheduleRecordVersion = 2;
// Bounds a decoder trusts no further (a record is written by delayq; these stop a damaged one).
constexpr uint64_t kMaxStoredPending = 100'000;

}  // namespace

std::string EncodeSchedule(const StoredSchedule& s) {
  std::string out;
  ByteWriter w(&out);
  const ScheduleSpec& spec = s.spec;
  const bool v2 = spec.priority != 0 || !spec.group.empty() || !s.state.cancelling.empty();
  w.U8(v2 ? 2 : 1);
  w.Bytes(spec.name);
  w.Bytes(spec.cron);
  w.Varint(static_cast<uint64_t>(spec.every_ms));
  w.Bytes(spec.timezone);
  w.Bytes(spec.payload);
  w.U8(static_cast<uint8_t>((spec.binary ? 1 : 0) | (spec.max_attempts ? 2 : 0) | (spec.start_at_ms ? 4 : 0) |
                            (spec.end_at_ms ? 8 : 0) | (s.state.paused ? 16 : 0)));
  w.Varint(static_cast<uint64_t>(spec.max_attempts.value_or(0)));
  w.SignedVarint(spec.start_at_ms.value_or(0));
  w.SignedVarint(spec.end_at_ms.value_or(0));
  w.U8(static_cast<uint8_t>(spec.misfire));
  w.Varint(spec.headers.size());
  for (const auto& [name, value] : spec.headers) {
    w.Bytes(name);
    w.Bytes(value);
  }
  w.SignedVarint(s.state.created_at_ms);
  w.SignedVarint(s.state.updated_at_ms);
  w.SignedVarint(s.state.handled_until_ms);
  w.SignedVarint(s.state.last_run_at_ms);
  w.Varint(s.state.pending.size());
  for (int64_t p : s.state.pending) w.SignedVarint(p);
  if (v2) {
    w.Varint(static_cast<uint64_t>(spec.priority));
    w.Bytes(spec.group);
    w.Varint(s.state.cancelling.size());
    for (int64_t c : s.state.cancelling) w.SignedVarint(c);
  }
  return out;
}

Status DecodeSchedule(std::string_view data, StoredSchedule* s) {
  ByteReader in(data);
  uint8_t version = 0, flags = 0, misfire = 0;
  if (!in.U8(&version)) return Status::Corruption("schedule record is empty");
  if (version < 1 || version > kScheduleRecordVersion) {
    return Status::Corruption(
        fmt::format("schedule record has format version {}, newer than this delayq understands ({}); upgrade delayq",
                    version, kScheduleRecordVersion));
  }
  ScheduleSpec& spec = s->spec;
  ScheduleState& state = s->state;
  uint64_t every = 0, max_attempts = 0, headers = 0, pending = 0;
  int64_t start_at = 0, end_at = 0;
  auto bad = [] { return Status::Corruption("schedule record is truncated or malformed"); };
  if (!in.Bytes(&spec.name) || !in.Bytes(&spec.cron) || !in.Varint(&every) || !in.Bytes(&spec.timezone) ||
      !in.Bytes(&spec.payload) || !in.U8(&flags) || !in.Varint(&max_attempts) || !in.SignedVarint(&start_at) ||
      !in.SignedVarint(&end_at) || !in.U8(&misfire) || misfire > static_cast<uint8_t>(Misfire::kRunAll) ||
      !in.Varint(&headers) || headers > Limits::kMaxHeaders) {
    return bad();
  }
  spec.every_ms = static_cast<int64_t>(every);
  spec.binary = flags & 1;
  spec.max_attempts = (flags & 2) ? std::optional(static_cast<int32_t>(max_attempts)) : std::nullopt;
  spec.start_at_ms = (flags & 4) ? std::optional(start_at) : std::nullopt;
  spec.end_at_ms = (flags & 8) ? std::optional(end_at) : std::nullopt;
  state.paused = flags & 16;
  spec.misfire = static_cast<Misfire>(misfire);
  spec.headers.clear();
  for (uint64_t i = 0; i < headers; ++i) {
    std::string name, value;
    if (!in.Bytes(&name) || !in.Bytes(&value)) return bad();
    spec.headers.emplace(std::move(name), std::move(value));
  }
  if (!in.SignedVarint(&state.created_at_ms) || !in.SignedVarint(&state.updated_at_ms) ||
      !in.SignedVarint(&state.handled_until_ms) || !in.SignedVarint(&state.last_run_at_ms) || !in.Varint(&pending) ||
      pending > kMaxStoredPending) {
    return bad();
  }
  state.pending.resize(pending);
  for (auto& p : state.pending) {
    if (!in.SignedVarint(&p)) return bad();
  }
  spec.priority = 0;
  spec.group.clear();
  state.cancelling.clear();
  if (version >= 2) {
    uint64_t priority = 0, cancelling = 0;
    if (!in.Varint(&priority) || priority > static_cast<uint64_t>(Limits::kMaxPriority) || !in.Bytes(&spec.group) ||
        spec.group.size() > Limits::kMaxGroup || !in.Varint(&cancelling) || cancelling > kMaxStoredPending) {
      return bad();
    }
    spec.priority = static_cast<int32_t>(priority);
    state.cancelling.resize(cancelling);
    for (auto& c : state.cancelling) {
      if (!in.SignedVarint(&c)) return bad();
    }
  }
  if (!in.empty()) return bad();
  return Status::Ok();
}

uint64_t FirstGeneration() {
  return (uint64_t{1} << 32) + SecureRandom64() % ((uint64_t{1} << 48) - (uint64_t{1} << 32));
}

}  // namespace delayq
