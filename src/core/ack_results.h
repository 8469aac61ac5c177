// An ack batch's results checked before a store acts on any of them (Queue::AckBatch): a request
// whose result is not JSON, or is too large, answers kInvalidArgument and is not acked; the others
// go on. Shared by the Redis and PostgreSQL stores (the embedded store checks each where it acks).
#pragma once

#include <span>
#include <vector>

#include "core/validate.h"
#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {

// Calls ack(valid requests) and answers one Status per request, in order.
template <typename Ack>
std::vector<Status> AckWithValidResults(std::span<const AckRequest> requests, Ack&& ack) {
  std::vector<Status> out(requests.size());
  std::vector<AckRequest> valid;
  std::vector<size_t> at;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].result) out[i] = ValidateResult(*requests[i].result);
    if (!out[i].ok()) continue;
    valid.push_back(requests[i]);
    at.push_back(i);
  }
  if (valid.size() == requests.size()) return ack(requests);
  if (!valid.empty()) {
    std::vector<Status> acked = ack(std::span<const AckRequest>(valid));
    for (size_t k = 0; k < at.size() && k < acked.size(); ++k) out[at[k]] = std::move(acked[k]);
  }
  return out;
}

}  // namespace delayq
