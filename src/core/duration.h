// Human durations ("250ms", "1.5s", "1h30m", "7d") and RFC 3339 timestamps, as accepted by
// the HTTP API ("delay", "deliver_at") and the CLI. Every error message says what is allowed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq {

// One or more <number><unit> parts, units ms s m h d, decimals allowed; rounded to the nearest
// millisecond. At most 100 years. No sign, no spaces.
Result<int64_t> ParseDuration(std::string_view text);
// The shortest exact form: 5400000 -> "1h30m", 250 -> "250ms", 0 -> "0ms".
std::string FormatDuration(int64_t ms);

// "2026-12-01T10:00:00Z", optional fraction of a second, "Z" or "+hh:mm"/"-hh:mm";
// "t"/"z" and a space instead of "T" accepted. Returns milliseconds since the epoch.
Result<int64_t> ParseTimestamp(std::string_view text);
// "2026-12-01T10:00:00.000Z" (UTC).
std::string FormatTimestamp(int64_t epoch_ms);

}  // namespace delayq
