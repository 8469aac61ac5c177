#include "core/json_value.h"

#include <malloc.h>
#include <simdjson.h>

#include <algorithm>

namespace delayq {

bool IsJsonValue(std::string_view bytes, size_t max_depth) {
  if (bytes.empty()) return false;
  thread_local simdjson::dom::parser parser;
  // The parser keeps buffers of several times the largest value it has checked, for the life of
  // its thread: past 1 MiB they are given back after the check.
  constexpr size_t kKeepParserBytes = 1 << 20;
  struct Shrink {
    ~Shrink() {
      if (parser.capacity() > kKeepParserBytes) {
        parser = simdjson::dom::parser{};
        ::malloc_trim(0);
      }
    }
  } shrink;
  if (parser.capacity() < bytes.size() || parser.max_depth() != max_depth) {
    if (parser.allocate(std::max<size_t>(bytes.size(), 4096), max_depth)) return false;
  }
  simdjson::dom::element e;
  return !parser.parse(bytes.data(), bytes.size(), true).get(e);
}

}  // namespace delayq
