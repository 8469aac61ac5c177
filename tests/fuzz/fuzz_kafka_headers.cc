// libFuzzer: the Kafka forwarder's reading of a message: its delayq-target and delayq-due headers
// (present or missing), the topic it came from, and a level list as the CLI reads it. The input
// is "TARGET\nDUE\nTOPIC"; a first byte's low bits drop a header. Any crash or sanitizer
// report, or routing accepted with a negative due time or an empty target, is a bug.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "delayq/kafka/levels.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace delayq::kafka;
  static const Levels levels = *Levels::Parse(kDefaultLevels, std::string(kDefaultPrefix), 4);
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string parts[3];
  for (int i = 0, at = 0; i < 3; ++i) {
    size_t nl = i < 2 ? input.find('\n', static_cast<size_t>(at)) : std::string::npos;
    parts[i] = input.substr(static_cast<size_t>(at),
                            nl == std::string::npos ? std::string::npos : nl - static_cast<size_t>(at));
    if (nl == std::string::npos) break;
    at = static_cast<int>(nl) + 1;
  }
  auto routing = ParseRouting((flags & 1) ? nullptr : &parts[0], (flags & 2) ? nullptr : &parts[1]);
  if (routing.ok()) {
    if (routing->due_ms < 0 || routing->target.empty()) std::abort();
    (void)levels.LevelFor(routing->due_ms);
  }
  const int level = levels.LevelOfTopic(parts[2]);
  if (level >= static_cast<int>(levels.size())) std::abort();
  if (level >= 0 && levels.LevelOfTopic(levels.TopicName(static_cast<size_t>(level), 0)) != level) std::abort();
  (void)Levels::Parse(parts[2]);
  return 0;
}
