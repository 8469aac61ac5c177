// Ending deliveries on the wire (POST /v1/queues/{q}/ack | nack | touch | release): {"receipt":
// "..."} or a batch {"receipts": [...]}, with "retry_in_ms", "error", "dead" for a nack, "lease_ms"
// and "progress" for a touch, and "result" for an ack (a batch's entry is then {"receipt",
// "result"} in place of the receipt's string). One receipt answers with its own status ({"acked": 1}, {"state",
// "due_at"},
// {"lease_deadline"}); a batch answers 200 {"acked"|"nacked"|"touched": n, "failed": [{"receipt",
// "code", "message"}]}.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq::wire {

struct ReceiptsBody {
  std::vector<std::string> receipts;
  bool batch = false;                   // "receipts": [...] rather than "receipt": "..."
  std::optional<int64_t> retry_in_ms;   // nack
  std::string error;                    // nack
  bool dead = false;                    // nack
  std::optional<int64_t> lease_ms;      // touch
  std::optional<std::string> progress;  // touch: the JSON text as given (null: none)
  // ack: one per receipt, the JSON text of its result as given (empty: none, or null); empty
  // when no receipt has one.
  std::vector<std::optional<std::string>> results;
};

std::string WriteAckRequest(std::span<const std::string> receipts, bool batch);
// An ack's body: each request's receipt, as {"receipt", "result"} when it has a result.
std::string WriteAckRequest(std::span<const AckRequest> requests, bool batch);
std::string WriteNackRequest(const NackRequest& request);
std::string WriteTouchRequest(const TouchRequest& request);
// Which route's body: each takes "receipt" or "receipts", and its own fields besides.
enum class ReceiptsFor { kAck, kNack, kTouch, kRelease };
// kInvalidArgument naming the field (also a field of another route: "lease_ms" on a nack);
// kTooLarge past Limits::kMaxBatch receipts. A result that is not JSON or is too large fails the
// whole request.
Result<ReceiptsBody> ParseReceiptsRequest(std::string_view body, ReceiptsFor route);

std::string WriteNackResponse(const NackResult& result);
std::string WriteTouchResponse(const TouchResult& result);
// A batch's answer: the successes (a receipt given twice counts once: `first` from
// FirstOccurrences) under `count_field`, and one failure per receipt as spelled.
std::string WriteBatchResponse(std::string_view count_field, const std::vector<std::string>& receipts,
                               const std::vector<Status>& statuses, const std::vector<size_t>& first);
Result<NackResult> ParseNackResponse(std::string_view body);
Result<TouchResult> ParseTouchResponse(std::string_view body);
// One Status per receipt, in order.
Result<std::vector<Status>> ParseBatchResponse(std::string_view body, const std::vector<std::string>& receipts);

}  // namespace delayq::wire
