#include "store/embedded/keys.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "core/record.h"

namespace delayq {
namespace {

uint64_t DoubleBits(double d) { return std::bit_cast<uint64_t>(d); }
double BitsDouble(uint64_t u) { return std::bit_cast<double>(u); }

}  // namespace

// QueueMeta format (see core/record.h for the versioning rule):
//   u8 version=1, u8 flags (bit 0 has_config, bit 1 paused), varint max_attempts,
//   varint base_ms, fixed64 factor bits, varint max_ms, fixed64 jitter bits, varint lease_ms,
//   varint max_payload, varint dead_retention_ms, varint max_delay_ms
//   version 2: version 1's fields, then fixed64 rate_per_s bits, varint burst, varint
//   max_reserved. Written only when one of them is set, so a queue without flow control stays
//   version 1 (an older delayq still reads it).
//   version 3: version 2's fields, then varint group_max_reserved, varint priority_aging_ms.
//   Written only when one of them is not its default.
//   version 4: version 3's fields, then varint keep_completed_ms. Written only when it is not 0.
std::string EncodeQueueMeta(const QueueMeta& m) {
  std::string out;
  ByteWriter w(&out);
  const QueueConfig& c = m.config;
  const QueueConfig defaults;
  const bool keeps = c.keep_completed_ms != 0;
  const bool lanes =
      keeps || c.group_max_reserved != defaults.group_max_reserved || c.priority_aging_ms != defaults.priority_aging_ms;
  const bool flow = lanes || c.rate_per_s != 0 || c.burst != 0 || c.max_reserved != 0;
  w.U8(keeps ? 4 : lanes ? 3 : flow ? 2 : 1);  // QueueMeta's own version (not the job record's)
  w.U8((m.has_config ? 1 : 0) | (m.paused ? 2 : 0));
  w.Varint(static_cast<uint64_t>(c.max_attempts));
  w.Varint(static_cast<uint64_t>(c.backoff.base_ms));
  w.Fixed64(DoubleBits(c.backoff.factor));
  w.Varint(static_cast<uint64_t>(c.backoff.max_ms));
  w.Fixed64(DoubleBits(c.backoff.jitter));
  w.Varint(static_cast<uint64_t>(c.lease_ms));
  w.Varint(static_cast<uint64_t>(c.max_payload));
  w.Varint(static_cast<uint64_t>(c.dead_retention_ms));
  w.Varint(static_cast<uint64_t>(c.max_delay_ms));
  if (flow) {
    w.Fixed64(DoubleBits(c.rate_per_s));
    w.Varint(static_cast<uint64_t>(c.burst));
    w.Varint(static_cast<uint64_t>(c.max_reserved));
  }
  if (lanes) {
    w.Varint(static_cast<uint64_t>(c.group_max_reserved));
    w.Varint(static_cast<uint64_t>(c.priority_aging_ms));
  }
  if (keeps) w.Varint(static_cast<uint64_t>(c.keep_completed_ms));
  return out;
}

Status DecodeQueueMeta(std::string_view data, QueueMeta* m) {
  ByteReader in(data);
  uint8_t version, flags;
  uint64_t max_attempts, base, factor, max_ms, jitter, lease, payload, retention, max_delay;
  if (!in.U8(&version)) return Status::Corruption("queue meta record is empty");
  if (version < 1 || version > 4) {
    return Status::Corruption(fmt::format(
        "queue meta record has format version {}, newer than this delayq understands (4); upgrade delayq", version));
  }
  uint64_t rate = DoubleBits(0), burst = 0, max_reserved = 0;
  uint64_t group_max_reserved = 0, aging = static_cast<uint64_t>(QueueConfig{}.priority_aging_ms), keep = 0;
  if (!in.U8(&flags) || !in.Varint(&max_attempts) || !in.Varint(&base) || !in.Fixed64(&factor) || !in.Varint(&max_ms) ||
      !in.Fixed64(&jitter) || !in.Varint(&lease) || !in.Varint(&payload) || !in.Varint(&retention) ||
      !in.Varint(&max_delay) ||
      (version >= 2 && (!in.Fixed64(&rate) || !in.Varint(&burst) || !in.Varint(&max_reserved))) ||
      (version >= 3 && (!in.Varint(&group_max_reserved) || !in.Varint(&aging))) ||
      (version >= 4 && !in.Varint(&keep)) || !in.empty()) {
    return Status::Corruption("queue meta record is truncated or malformed");
  }
  m->has_config = flags & 1;
  m->paused = flags & 2;
  QueueConfig& c = m->config;
  c.max_attempts = static_cast<int32_t>(max_attempts);
  c.backoff.base_ms = static_cast<int64_t>(base);
  c.backoff.factor = BitsDouble(factor);
  c.backoff.max_ms = static_cast<int64_t>(max_ms);
  c.backoff.jitter = BitsDouble(jitter);
  c.lease_ms = static_cast<int64_t>(lease);
  c.max_payload = static_cast<int64_t>(payload);
  c.dead_retention_ms = static_cast<int64_t>(retention);
  c.max_delay_ms = static_cast<int64_t>(max_delay);
  c.rate_per_s = BitsDouble(rate);
  c.burst = static_cast<int64_t>(burst);
  c.max_reserved = static_cast<int64_t>(max_reserved);
  c.group_max_reserved = static_cast<int64_t>(group_max_reserved);
  c.priority_aging_ms = static_cast<int64_t>(aging);
  c.keep_completed_ms = static_cast<int64_t>(keep);
  return Status::Ok();
}

}  // namespace delayq
