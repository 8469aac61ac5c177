// libFuzzer: bytes as a Redis server would send them, decoded as the Redis store decodes every
// reply (hiredis' reader, then delayq's Value), and each string through the decoders the store
// applies to what Redis holds (job records, receipts). Any crash or sanitizer report is a bug.
#include <cstdint>
#include <string_view>

#include "core/receipt.h"
#include "core/record.h"
#include "store/redis/redis_client.h"

namespace {

void Walk(const delayq::redis::Value& v) {
  (void)v.AsInt();
  if (v.type == delayq::redis::Value::kString || v.type == delayq::redis::Value::kError) {
    delayq::JobRecord record;
    (void)delayq::DecodeJobRecord(v.str, &record);
    (void)delayq::Receipt::Parse(v.str);
  }
  for (const auto& e : v.array) Walk(e);
}

// hiredis 0.14 allocates a multi-bulk reply's element array as its header declares, before any
// element arrives ("*1333333333" is a 10 GB calloc). Redis is trusted (docs/security.md says
// so); replies declaring more than a million elements are left out here rather than reported.
bool DeclaresHugeArray(std::string_view bytes) {
  for (size_t at = 0; (at = bytes.find_first_of("*~%>", at)) != std::string_view::npos; ++at) {
    size_t digits = 0;
    while (at + 1 + digits < bytes.size() && bytes[at + 1 + digits] >= '0' && bytes[at + 1 + digits] <= '9') ++digits;
    if (digits > 6) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (DeclaresHugeArray({reinterpret_cast<const char*>(data), size})) return 0;
  auto values = delayq::redis::DecodeReplies({reinterpret_cast<const char*>(data), size});
  if (!values.ok()) return 0;
  for (const auto& v : *values) Walk(v);
  return 0;
}
