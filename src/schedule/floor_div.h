// Integer division rounded toward minus infinity: a time before 1970 (negative) falls in the
// second or day that holds it, as for a time after.
#pragma once

#include <cstdint>

namespace delayq {

constexpr int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace delayq
