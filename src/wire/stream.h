// Push delivery on the wire (POST /v1/queues/{q}/stream, SPEC §11.4): the request {"max_in_flight",
// "lease_ms", "max_bytes"} (every field optional; an empty body is all defaults), answered with
// application/x-ndjson lines: each a delivery as in a reserve answer, or {"heartbeat": <ms since
// the epoch>} when nothing was sent for a while.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq::wire {

struct StreamRequest {
  int32_t max_in_flight = 100;      // 1..1000: deliveries unacknowledged on the stream at once
  std::optional<int64_t> lease_ms;  // as a reserve's: 1000..43200000, default the queue's
  // As a reserve's: the jobs taken at once stop before the one that would take their stored size
  // over this (the first always comes).
  int64_t max_bytes = Limits::kDefaultReserveBytes;
};

std::string WriteStreamRequest(const StreamRequest& request);
Result<StreamRequest> ParseStreamRequest(std::string_view body);

// One line of the answer, with its "\n".
std::string WriteStreamDelivery(const Delivery& d);
std::string WriteStreamHeartbeat(int64_t now_ms);

// A line read back: a delivery, or a heartbeat's time; an error line (the stream's last: the store
// could not serve) is its error.
using StreamLine = std::variant<Delivery, int64_t>;
Result<StreamLine> ParseStreamLine(std::string_view line);

}  // namespace delayq::wire
