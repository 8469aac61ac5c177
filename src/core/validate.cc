#include "core/validate.h"

#include <fmt/format.h>

#include "core/duration.h"
#include "core/errors.h"
#include "core/json_value.h"
#include "core/trace_context.h"
#include "core/ulid.h"

namespace delayq {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == ':' || c == '-';
}

std::string Printable(std::string_view s, size_t max = 64) {
  std::string out;
  for (char c : s.substr(0, max)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || u >= 0x80 || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace

Status ValidateQueueName(std::string_view name) {
  if (name.empty() || name.size() > Limits::kMaxQueueName) {
    return Status::InvalidArgument(
        fmt::format("queue name \"{}\" has {} characters; it must have 1 to {} of [A-Za-z0-9._:-]", Printable(name),
                    name.size(), Limits::kMaxQueueName));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return Status::InvalidArgument(fmt::format("queue name \"{}\" contains '{}'; allowed are [A-Za-z0-9._:-]",
                                                 Printable(name), Printable(std::string_view(&c, 1))));
    }
  }
  // A URL's path cannot carry them: a proxy, curl or a browser takes "." and ".." (and their %2E
  // escapes, as WHATWG URLs do) out of the path before delayq sees it.
  if (name == "." || name == "..") {
    return Status::InvalidArgument(fmt::format(
        "queue name \"{}\" is a path's dot segment, which proxies and browsers take out of a URL; give a name "
        "with a letter, digit, '_', ':' or '-'",
        name));
  }
  return Status::Ok();
}

Status ValidateLeaseMs(int64_t lease_ms, std::string_view field) {
  if (lease_ms < Limits::kMinLeaseMs || lease_ms > Limits::kMaxLeaseMs) {
    return Status::InvalidArgument(fmt::format("{} is {}; it must be between {} and {} (12h)", field, lease_ms,
                                               Limits::kMinLeaseMs, Limits::kMaxLeaseMs));
  }
  return Status::Ok();
}

Status ValidateJobRef(const JobRef& ref) {
  if (!ref.id.empty()) return Ulid::Parse(ref.id) ? Status::Ok() : errors::NotAJobId("id", ref.id);
  if (ref.key.empty()) return Status::InvalidArgument("give a job id or a key");
  return ValidateKey(ref.key);
}

Status ValidateKey(std::string_view key, std::string_view field) {
  if (key.size() > Limits::kMaxKey) {
    return Status::InvalidArgument(
        fmt::format("{} has {} bytes; at most {} are allowed", field, key.size(), Limits::kMaxKey));
  }
  if (key.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(fmt::format("{} contains a NUL byte; it must not", field));
  }
  return Status::Ok();
}

Status ValidateReserveMax(int64_t max) {
  if (max < 1 || max > Limits::kMaxReserve) {
    return Status::InvalidArgument(fmt::format("max is {}; it must be between 1 and {}", max, Limits::kMaxReserve));
  }
  return Status::Ok();
}

Status ValidateMaxAttempts(int64_t max_attempts, std::string_view field) {
  if (max_attempts < 1 || max_attempts > Limits::kMaxAttempts) {
    return Status::InvalidArgument(
        fmt::format("{} is {}; it must be between 1 and {}", field, max_attempts, Limits::kMaxAttempts));
  }
  return Status::Ok();
}

Status ValidateConfig(const QueueConfig& c) {
  auto range = [](std::string_view field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
      return Status::InvalidArgument(fmt::format("{} is {}; it must be between {} and {}", field, v, lo, hi));
    }
    return Status::Ok();
  };
  DELAYQ_RETURN_IF_ERROR(ValidateMaxAttempts(c.max_attempts));
  DELAYQ_RETURN_IF_ERROR(range("backoff.base_ms", c.backoff.base_ms, 0, 86'400'000));
  DELAYQ_RETURN_IF_ERROR(range("backoff.max_ms", c.backoff.max_ms, 0, 30LL * 86'400'000));
  if (!(c.backoff.factor >= 1.0 && c.backoff.factor <= 100.0)) {
    return Status::InvalidArgument(fmt::format("backoff.factor is {}; it must be between 1 and 100", c.backoff.factor));
  }
  if (!(c.backoff.jitter >= 0.0 && c.backoff.jitter <= 1.0)) {
    return Status::InvalidArgument(fmt::format("backoff.jitter is {}; it must be between 0 and 1", c.backoff.jitter));
  }
  DELAYQ_RETURN_IF_ERROR(ValidateLeaseMs(c.lease_ms));
  DELAYQ_RETURN_IF_ERROR(range("max_payload", c.max_payload, 1, Limits::kMaxPayloadCeiling));
  DELAYQ_RETURN_IF_ERROR(range("dead_retention_ms", c.dead_retention_ms, 1'000, 3650LL * 86'400'000));
  DELAYQ_RETURN_IF_ERROR(range("max_delay_ms", c.max_delay_ms, 0, 100LL * 365 * 86'400'000));
  if (!(c.rate_per_s >= 0.0 && c.rate_per_s <= 1e6)) {
    return Status::InvalidArgument(
        fmt::format("rate_per_s is {}; it must be between 0 (no limit) and 1000000 deliveries a second", c.rate_per_s));
  }
  DELAYQ_RETURN_IF_ERROR(range("burst", c.burst, 0, 1'000'000));
  DELAYQ_RETURN_IF_ERROR(range("max_reserved", c.max_reserved, 0, 1'000'000));
  DELAYQ_RETURN_IF_ERROR(range("group_max_reserved", c.group_max_reserved, 0, 1'000'000));
  DELAYQ_RETURN_IF_ERROR(range("priority_aging_ms", c.priority_aging_ms, 0, 100LL * 365 * 86'400'000));
  DELAYQ_RETURN_IF_ERROR(range("keep_completed_ms", c.keep_completed_ms, 0, Limits::kMaxKeepCompletedMs));
  return Status::Ok();
}

Status ValidateWaitMs(int64_t wait_ms) {
  if (wait_ms < 0 || wait_ms > Limits::kMaxWaitMs) {
    return Status::InvalidArgument(
        fmt::format("wait_ms is {}; it must be between 0 and {}", wait_ms, Limits::kMaxWaitMs));
  }
  return Status::Ok();
}

Status ValidateReserve(const ReserveRequest& r) {
  DELAYQ_RETURN_IF_ERROR(ValidateReserveMax(r.max));
  DELAYQ_RETURN_IF_ERROR(ValidateWaitMs(r.wait_ms));
  if (r.max_bytes < 1 || r.max_bytes > Limits::kMaxReserveBytes) {
    return Status::InvalidArgument(
        fmt::format("max_bytes is {}; it must be between 1 and {} (256 MiB)", r.max_bytes, Limits::kMaxReserveBytes));
  }
  if (r.lease_ms) return ValidateLeaseMs(*r.lease_ms);
  return Status::Ok();
}

Status ValidateDate(int64_t ms, std::string_view field) {
  if (ms < 0 || ms > Limits::kMaxDateMs) {
    return Status::InvalidArgument(
        fmt::format("{} is {}; it must be a date between 0 (1970-01-01T00:00:00Z) and {} (9999-12-31T23:59:59.999Z), "
                    "in epoch milliseconds or as an RFC 3339 string",
                    field, ms, Limits::kMaxDateMs));
  }
  return Status::Ok();
}

Status ValidateDeadListLimit(int32_t limit) {
  if (limit < 1 || limit > 1000) {
    return Status::InvalidArgument(fmt::format("limit is {}; it must be between 1 and 1000", limit));
  }
  return Status::Ok();
}

Status ValidateBatchSize(size_t jobs) {
  if (jobs == 0) {
    return Status::InvalidArgument(fmt::format("jobs is empty; a batch holds 1 to {} jobs", Limits::kMaxBatch));
  }
  if (jobs > Limits::kMaxBatch) {
    return Status::TooLarge(fmt::format("jobs has {} entries; a batch holds at most {}", jobs, Limits::kMaxBatch));
  }
  return Status::Ok();
}

Status ValidateScheduleHistogram(int64_t bucket_ms, int32_t buckets) {
  if (bucket_ms < 60'000 || bucket_ms % 60'000 != 0) {
    return Status::InvalidArgument(
        fmt::format("bucket is {} ms; it must be a whole number of minutes (60000, 300000, 3600000, ...)", bucket_ms));
  }
  if (buckets < 1 || buckets > 10'000) {
    return Status::InvalidArgument(fmt::format("the histogram has {} buckets; it may have 1 to 10000", buckets));
  }
  return Status::Ok();
}

Status ValidateNack(const NackRequest& r, const QueueConfig& config) {
  if (r.retry_in_ms && (*r.retry_in_ms < 0 || *r.retry_in_ms > config.max_delay_ms)) {
    return Status::InvalidArgument(
        fmt::format("retry_in_ms is {}; it must be between 0 and the queue's max_delay_ms ({})", *r.retry_in_ms,
                    config.max_delay_ms));
  }
  return Status::Ok();
}

namespace {

// A JSON value a consumer reports (a touch's progress, an ack's result): at most `max` bytes of
// JSON nested at most `depth` levels (less than a request body may: it is inside one).
Status ValidateReportedJson(std::string_view field, std::string_view value, size_t max, size_t depth,
                            std::string_view example) {
  if (value.size() > max) {
    return Status::InvalidArgument(
        fmt::format("{} is {} bytes of JSON; at most {} are allowed", field, value.size(), max));
  }
  if (!IsJsonValue(value, depth)) {
    return Status::InvalidArgument(
        fmt::format("{} is not a JSON value nested at most {} levels (numbers within 64-bit integers and doubles); "
                    "give a number, string, object or array, such as {}",
                    field, depth, example));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateTouch(const TouchRequest& r) {
  if (r.lease_ms) DELAYQ_RETURN_IF_ERROR(ValidateLeaseMs(*r.lease_ms));
  if (!r.progress) return Status::Ok();
  // Beside the receipts at the body's top level: one level less than the body.
  return ValidateReportedJson("progress", *r.progress, Limits::kMaxProgress, kMaxJsonDepth - 1, "0.5 or {\"done\": 3}");
}

Status ValidateResult(std::string_view result, std::string_view field) {
  // In a batch entry ({"receipts": [{"result": ...}]}): three levels less than the body, in every
  // form alike.
  static_assert(kMaxResultDepth == kMaxJsonDepth - 3);
  return ValidateReportedJson(field, result, Limits::kMaxResult, kMaxResultDepth, "true or {\"order\": \"A-17\"}");
}

std::string NackErrorText(const NackRequest& r) {
  if (r.error.empty()) return "nacked without an error message";
  return r.error.substr(0, Limits::kMaxErrorText);
}

Status ValidateEnqueue(const EnqueueRequest& r, const QueueConfig& config, std::string_view prefix) {
  if (r.payload.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}payload is empty; a job needs a payload of 1 to {} bytes", prefix, config.max_payload));
  }
  if (static_cast<int64_t>(r.payload.size()) > config.max_payload) {
    return Status::TooLarge(
        fmt::format("{}payload has {} bytes; this queue accepts at most {} (its config max_payload)", prefix,
                    r.payload.size(), config.max_payload));
  }
  if (!r.key.empty()) DELAYQ_RETURN_IF_ERROR(ValidateKey(r.key, fmt::format("{}key", prefix)));
  if (r.replace && r.key.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}replace is set without a key; replace needs the key of the job to replace", prefix));
  }
  if (r.debounce && r.key.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}debounce is set without a key; debounce needs the key of the job to push back", prefix));
  }
  if (r.headers.size() > Limits::kMaxHeaders) {
    return Status::InvalidArgument(
        fmt::format("{}headers has {} entries; at most {} are allowed", prefix, r.headers.size(), Limits::kMaxHeaders));
  }
  // The trace context first: an oversize traceparent is named as such, not as headers too big.
  if (!r.headers.empty()) DELAYQ_RETURN_IF_ERROR(ValidateTraceHeaders(r.headers, prefix));
  size_t header_bytes = 0;
  for (const auto& [name, value] : r.headers) {
    if (name.empty()) {
      return Status::InvalidArgument(fmt::format("{}headers has an empty name", prefix));
    }
    header_bytes += name.size() + value.size();
  }
  if (header_bytes > Limits::kMaxHeaderBytes) {
    return Status::InvalidArgument(fmt::format("{}headers have {} bytes in all; at most {} are allowed", prefix,
                                               header_bytes, Limits::kMaxHeaderBytes));
  }
  if (r.max_attempts && !ValidateMaxAttempts(*r.max_attempts).ok()) {  // the field's name built only then
    return ValidateMaxAttempts(*r.max_attempts, fmt::format("{}max_attempts", prefix));
  }
  if (r.key_ttl_ms < 0 || r.key_ttl_ms > Limits::kMaxKeyTtlMs) {
    return Status::InvalidArgument(fmt::format("{}key_ttl_ms is {}; it must be between 0 and {} (30 days)", prefix,
                                               r.key_ttl_ms, Limits::kMaxKeyTtlMs));
  }
  if (r.key_ttl_ms > 0 && r.key.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}key_ttl_ms is set without a key; it keeps a key taken after its job is done, so give a key", prefix));
  }
  if (r.priority < 0 || r.priority > Limits::kMaxPriority) {
    return Status::InvalidArgument(fmt::format("{}priority is {}; it must be between 0 (the default) and {} (first)",
                                               prefix, r.priority, Limits::kMaxPriority));
  }
  if (r.group.size() > Limits::kMaxGroup) {
    return Status::InvalidArgument(
        fmt::format("{}group has {} bytes; at most {} are allowed", prefix, r.group.size(), Limits::kMaxGroup));
  }
  if (r.group.find('\0') != std::string::npos) {
    return Status::InvalidArgument(fmt::format("{}group contains a NUL byte; it must not", prefix));
  }
  return Status::Ok();
}

Status ValidateWhen(const When& when, const QueueConfig& config, std::string_view prefix) {
  if (when.delay_ms && when.deliver_at_ms) {
    return Status::InvalidArgument(
        fmt::format("{}delay and deliver_at are both given; give one of them (or neither for now)", prefix));
  }
  if (when.delay_ms) {
    int64_t d = *when.delay_ms;
    if (d < 0) {
      return Status::InvalidArgument(fmt::format("{}delay is {} ms; it must not be negative", prefix, d));
    }
    if (d > config.max_delay_ms) {
      return Status::InvalidArgument(
          fmt::format("{}delay is {} ({} ms); this queue accepts at most {} (its config max_delay_ms)", prefix,
                      FormatDuration(d), d, FormatDuration(config.max_delay_ms)));
    }
  }
  return Status::Ok();
}

Result<int64_t> ResolveDue(const When& when, int64_t now_ms, const QueueConfig& config, std::string_view prefix) {
  DELAYQ_RETURN_IF_ERROR(ValidateWhen(when, config, prefix));
  if (when.delay_ms) return now_ms + *when.delay_ms;
  if (when.deliver_at_ms) {
    int64_t at = *when.deliver_at_ms;
    if (at > now_ms + config.max_delay_ms) {
      return Status::InvalidArgument(
          fmt::format("{}deliver_at {} is {} from now; this queue accepts at most {} (its config "
                      "max_delay_ms)",
                      prefix, FormatTimestamp(at), FormatDuration(at - now_ms), FormatDuration(config.max_delay_ms)));
    }
    return std::max(at, now_ms);
  }
  return now_ms;
}

}  // namespace delayq
