#include "core/backoff.h"

#include <algorithm>
#include <cmath>

namespace delayq {

// The Lua twin is backoff_ms in src/store/redis/lua/prelude.lua; RedisScripts.TheLuaBackOffIsTheCppOne
// holds them to the same answers. factor^exp overflows to infinity after a few hundred attempts:
// that is the cap (and with base_ms 0 the delay is 0, not 0 * infinity, which is NaN).
int64_t BackoffDelayMs(const BackoffPolicy& p, int32_t attempt, double unit_random) {
  double exp = std::max(0, attempt - 1);
  double raw = p.base_ms == 0 ? 0.0 : static_cast<double>(p.base_ms) * std::pow(p.factor, exp);
  double capped = raw < static_cast<double>(p.max_ms) ? raw : static_cast<double>(p.max_ms);
  double jittered = capped * (1.0 + p.jitter * (2.0 * unit_random - 1.0));
  return std::clamp<int64_t>(std::llround(jittered), 0, p.max_ms);
}

}  // namespace delayq
