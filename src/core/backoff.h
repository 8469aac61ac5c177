// Retry delays for a nack without an explicit retry_in_ms (see BackoffPolicy in delayq/job.h).
#pragma once

#include <cstdint>
#include <random>

#include "delayq/job.h"

namespace delayq {

// Delay before the next delivery after `attempt` deliveries failed (attempt >= 1).
// `unit_random` is uniform in [0, 1).
int64_t BackoffDelayMs(const BackoffPolicy& policy, int32_t attempt, double unit_random);

}  // namespace delayq
