// Whether bytes are one JSON value: the check for the values a store keeps as JSON text and an
// answer shows verbatim (a touch's progress; a payload shown as "payload" rather than base64).
#pragma once

#include <cstddef>
#include <string_view>

namespace delayq {

// Deeper nesting is refused, in request bodies and in the values they carry.
inline constexpr size_t kMaxJsonDepth = 64;

// True when `bytes` is exactly one valid JSON value (UTF-8, surrounding whitespace allowed),
// nested at most max_depth levels.
bool IsJsonValue(std::string_view bytes, size_t max_depth = kMaxJsonDepth);

}  // namespace delayq
