// Delay levels and the Kafka conventions (docs/operations.md, "The Kafka forwarder"), shared by the producer SDK and
// the forwarder — and by producers in other languages, which follow the same rules by hand:
//   - level topics are named `<prefix>.<level>.<n>`, n in [0, topics_per_level), e.g.
//     "delayq.30s.0"; a level is written in its shortest form ("1m", not "60s");
//   - a delayed message carries the headers `delayq-target` (the topic to deliver to) and
//     `delayq-due` (epoch milliseconds, decimal); key, value and other headers are its own;
//   - it goes to the largest level not above its delay (the smallest level when shorter);
//   - a message the forwarder cannot route goes to `<prefix>.dead` with `delayq-error`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::kafka {

inline constexpr std::string_view kTargetHeader = "delayq-target";
inline constexpr std::string_view kDueHeader = "delayq-due";
inline constexpr std::string_view kErrorHeader = "delayq-error";
inline constexpr std::string_view kDefaultPrefix = "delayq";
inline constexpr std::string_view kDefaultLevels = "1s,5s,10s,30s,1m,5m,10m,30m,1h,2h,6h,1d";

// An increasing list of delays, each with its level topics.
class Levels {
 public:
  // "1s,5s,10s,30s,1m": durations as the CLI reads them (ms s m h d), strictly increasing,
  // each at least 1ms, at most 64 of them. The message names the offending entry.
  static Result<Levels> Parse(std::string_view text, std::string prefix = std::string(kDefaultPrefix),
                              int topics_per_level = 1);

  size_t size() const { return levels_ms_.size(); }
  int64_t level_ms(size_t i) const { return levels_ms_[i]; }
  int64_t smallest_ms() const { return levels_ms_.front(); }
  int topics_per_level() const { return topics_per_level_; }
  const std::string& prefix() const { return prefix_; }

  // The index of the largest level not above `delay_ms` (0 when the delay is shorter).
  size_t LevelFor(int64_t delay_ms) const;
  // `<prefix>.<level>.<n>`.
  std::string TopicName(size_t level, int n) const;
  // Every level topic, level by level.
  std::vector<std::string> AllTopics() const;
  // The level whose topics include `topic`; -1 when it is not a level topic.
  int LevelOfTopic(std::string_view topic) const;
  // `<prefix>.dead`.
  std::string DeadTopic() const { return prefix_ + ".dead"; }
  // "1s" for level 0 with levels 1s,5s,...
  std::string LevelName(size_t level) const;

 private:
  std::vector<int64_t> levels_ms_;
  std::string prefix_;
  int topics_per_level_ = 1;
};

// The due time of a message from its headers, or why it has none that can be used.
struct Routing {
  std::string target;
  int64_t due_ms = 0;
};
// `target` and `due` are the raw header values (nullptr: header missing).
Result<Routing> ParseRouting(const std::string* target, const std::string* due);

}  // namespace delayq::kafka
