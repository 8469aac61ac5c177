// Reserve on the wire (POST /v1/queues/{q}/reserve): {"max", "wait_ms", "lease_ms", "max_bytes"}
// (every field optional; an empty body is all defaults), answered {"jobs": [delivery, ...]} with
// each delivery {"id", "receipt", "payload" | "payload_base64", "headers", "attempt",
// "max_attempts", "due_at", "key", "lease_deadline"}.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"
#include "wire/json_writer.h"

namespace delayq::wire {

std::string WriteReserveRequest(const ReserveRequest& request);
// Validated as every store validates it (ValidateReserve).
Result<ReserveRequest> ParseReserveRequest(std::string_view body);

void WriteDelivery(JsonWriter& w, const Delivery& d);
std::string WriteReserveResponse(std::span<const Delivery> deliveries);
Result<std::vector<Delivery>> ParseReserveResponse(std::string_view body);

}  // namespace delayq::wire
