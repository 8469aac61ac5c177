#include "core/json_value.h"

#include <malloc.h>

#include <algorithm>

namespace delayq {
namespace {

simdjson::dom::parser& ThreadParser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

constexpr size_t kKeepParserBytes = 1 << 20;

}  // namespace

ThreadDomParse::ThreadDomParse(std::string_view bytes, size_t max_depth) {
  auto& parser = ThreadParser();
  if (parser.capacity() < bytes.size() || parser.max_depth() != max_depth) {
    // Bodies (depth 64), progress and results (less) take turns: keep the capacity had.
    error_ = parser.allocate(std::max({bytes.size(), parser.capacity(), size_t{4096}}), max_depth);
    if (error_) return;
  }
  error_ = parser.parse(bytes.data(), bytes.size(), true).get(root_);
}

ThreadDomParse::~ThreadDomParse() {
  auto& parser = ThreadParser();
  if (parser.capacity() > kKeepParserBytes) {
    parser = simdjson::dom::parser{};
    ::malloc_trim(0);
  }
}

bool IsJsonValue(std::string_view bytes, size_t max_depth) {
  if (bytes.empty()) return false;
  return ThreadDomParse(bytes, max_depth).error() == simdjson::SUCCESS;
}

}  // namespace delayq
