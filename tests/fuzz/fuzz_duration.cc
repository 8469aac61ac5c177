// libFuzzer: the duration and timestamp parsers. A parsed value must format and parse back to
// itself; nothing may crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/duration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto d = delayq::ParseDuration(text);
  if (d.ok()) {
    if (*d < 0) std::abort();
    auto again = delayq::ParseDuration(delayq::FormatDuration(*d));
    if (!again.ok() || *again != *d) std::abort();
  } else if (d.status().message().empty()) {
    std::abort();
  }
  auto t = delayq::ParseTimestamp(text);
  if (t.ok()) {
    auto again = delayq::ParseTimestamp(delayq::FormatTimestamp(*t));
    if (!again.ok() || *again != *t) std::abort();
  }
  return 0;
}
