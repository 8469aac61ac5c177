// %XX escapes undone, as a URI's parts are read (RFC 3986 §2.1): an escape that is not two hex
// digits stays as it was. The HTTP layer reads request targets with it, and core/redact.h the
// passwords of connection URLs. (The Redis store's URL parser refuses a bad escape instead.)
#pragma once

#include <string>
#include <string_view>

namespace delayq {

// The value of one hex digit (either case), or -1.
int HexValue(char c);

// With plus_is_space, '+' reads as a space (an HTML form's query).
std::string PercentDecoded(std::string_view s, bool plus_is_space = false);

}  // namespace delayq
