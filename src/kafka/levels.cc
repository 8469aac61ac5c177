#include "delayq/kafka/levels.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/duration.h"

namespace delayq::kafka {
namespace {

constexpr size_t kMaxLevels = 64;
constexpr size_t kMaxTopicLength = 249;  // Kafka's own limit

bool IsTopicChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

Status CheckTopicName(std::string_view what, std::string_view name) {
  if (name.empty()) return Status::InvalidArgument(fmt::format("{} is empty; name a Kafka topic", what));
  if (name.size() > kMaxTopicLength) {
    return Status::InvalidArgument(
        fmt::format("{} is {} characters; Kafka allows at most {}", what, name.size(), kMaxTopicLength));
  }
  if (!std::all_of(name.begin(), name.end(), IsTopicChar)) {
    return Status::InvalidArgument(fmt::format(
        "{} \"{}\" has a character Kafka does not allow; use letters, digits, '.', '_' and '-'", what, name));
  }
  return Status::Ok();
}

}  // namespace

Result<Levels> Levels::Parse(std::string_view text, std::string prefix, int topics_per_level) {
  DELAYQ_RETURN_IF_ERROR(CheckTopicName("the topic prefix", prefix));
  if (topics_per_level < 1 || topics_per_level > 1000) {
    return Status::InvalidArgument(
        fmt::format("topics per level is {}; it must be between 1 and 1000", topics_per_level));
  }
  Levels levels;
  levels.prefix_ = std::move(prefix);
  levels.topics_per_level_ = topics_per_level;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) {
      return Status::InvalidArgument(
          fmt::format("levels \"{}\" has an empty entry; write them like {}", text, kDefaultLevels));
    }
    Result<int64_t> ms = ParseDuration(item);
    if (!ms.ok()) {
      return Status::InvalidArgument(fmt::format("level \"{}\" is not a duration ({}); write levels like {}", item,
                                                 ms.status().message(), kDefaultLevels));
    }
    if (*ms < 1) return Status::InvalidArgument(fmt::format("level \"{}\" is zero; levels start at 1ms", item));
    if (!levels.levels_ms_.empty() && *ms <= levels.levels_ms_.back()) {
      return Status::InvalidArgument(
          fmt::format("levels must increase: {} follows {}", item, FormatDuration(levels.levels_ms_.back())));
    }
    levels.levels_ms_.push_back(*ms);
    if (levels.levels_ms_.size() > kMaxLevels) {
      return Status::InvalidArgument(fmt::format("more than {} levels; use fewer", kMaxLevels));
    }
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    DELAYQ_RETURN_IF_ERROR(CheckTopicName("a level topic name", levels.TopicName(i, topics_per_level - 1)));
  }
  return levels;
}

size_t Levels::LevelFor(int64_t delay_ms) const {
  auto above = std::upper_bound(levels_ms_.begin(), levels_ms_.end(), delay_ms);
  return above == levels_ms_.begin() ? 0 : static_cast<size_t>(above - levels_ms_.begin()) - 1;
}

std::string Levels::LevelName(size_t level) const { return FormatDuration(levels_ms_[level]); }

std::string Levels::TopicName(size_t level, int n) const {
  return fmt::format("{}.{}.{}", prefix_, LevelName(level), n);
}

std::vector<std::string> Levels::AllTopics() const {
  std::vector<std::string> topics;
  for (size_t i = 0; i < size(); ++i) {
    for (int n = 0; n < topics_per_level_; ++n) topics.push_back(TopicName(i, n));
  }
  return topics;
}

int Levels::LevelOfTopic(std::string_view topic) const {
  // `<prefix>.<level>.<n>`: parse rather than search, so this stays cheap per message.
  if (topic.size() <= prefix_.size() + 1 || topic.substr(0, prefix_.size()) != prefix_ ||
      topic[prefix_.size()] != '.') {
    return -1;
  }
  std::string_view rest = topic.substr(prefix_.size() + 1);
  size_t dot = rest.rfind('.');
  if (dot == std::string_view::npos) return -1;
  int n = -1;
  std::string_view number = rest.substr(dot + 1);
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
  if (ec != std::errc() || end != number.data() + number.size() || n < 0 || n >= topics_per_level_) return -1;
  Result<int64_t> ms = ParseDuration(rest.substr(0, dot));
  if (!ms.ok()) return -1;
  auto it = std::lower_bound(levels_ms_.begin(), levels_ms_.end(), *ms);
  if (it == levels_ms_.end() || *it != *ms) return -1;
  size_t level = static_cast<size_t>(it - levels_ms_.begin());
  return rest.substr(0, dot) == LevelName(level) ? static_cast<int>(level) : -1;
}

Result<Routing> ParseRouting(const std::string* target, const std::string* due) {
  if (target == nullptr) {
    return Status::InvalidArgument(fmt::format("no {} header; name the topic to deliver to", kTargetHeader));
  }
  if (due == nullptr) {
    return Status::InvalidArgument(fmt::format("no {} header; give the due time in epoch milliseconds", kDueHeader));
  }
  DELAYQ_RETURN_IF_ERROR(CheckTopicName(fmt::format("{} header", kTargetHeader), *target));
  int64_t due_ms = 0;
  auto [end, ec] = std::from_chars(due->data(), due->data() + due->size(), due_ms);
  if (due->empty() || ec != std::errc() || end != due->data() + due->size() || due_ms < 0) {
    return Status::InvalidArgument(fmt::format(
        "{} header \"{}\" is not a time; give epoch milliseconds as decimal digits", kDueHeader, due->substr(0, 40)));
  }
  return Routing{*target, due_ms};
}

}  // namespace delayq::kafka
