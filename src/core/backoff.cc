#include "core/backoff.h"

#include <algorithm>
#include <cmath>

namespace delayq {

int64_t BackoffDelayMs(const BackoffPolicy& p, int32_t attempt, double unit_random) {
  double exp = std::max(0, attempt - 1);
  double raw = static_cast<double>(p.base_ms) * std::pow(p.factor, exp);
  double capped = std::min(raw, static_cast<double>(p.max_ms));
  double jittered = capped * (1.0 + p.jitter * (2.0 * unit_random - 1.0));
  return std::clamp<int64_t>(std::llround(jittered), 0, p.max_ms);
}

}  // namespace delayq
