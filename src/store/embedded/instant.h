// Now and the next deadline, on both of the engine's clocks (delayq/clock.h).
#pragma once

#include <cstdint>

#include "delayq/clock.h"

namespace delayq {

// Now, on both clocks.
struct Instant {
  int64_t wall_us = 0;  // Clock::NowUs
  int64_t mono_us = 0;  // Clock::MonoUs
  int64_t wall_ms() const { return wall_us / 1000; }
};

// The next moment the scheduler has work, on either clock (Clock::kNever: none).
struct Deadline {
  int64_t wall_us = Clock::kNever;
  int64_t mono_us = Clock::kNever;
};

}  // namespace delayq
