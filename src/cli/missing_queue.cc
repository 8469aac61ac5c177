// Telling a user that the queue they named does not exist (reading or reserving creates none),
// and which existing queue they may have meant: `delayq reserve ordres`.
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "core/nearest.h"

namespace delayq::cli {

std::optional<Status> MissingQueue(Queue& client, const std::string& queue) {
  auto stats = client.Stats(queue);
  if (stats.ok() || stats.status().code() != Code::kNotFound) return std::nullopt;
  std::string hint;
  if (auto all = client.ListQueues(); all.ok()) {
    std::vector<std::string> names;
    for (const QueueStats& s : *all) names.push_back(s.name);
    hint = DidYouMean(queue, std::vector<std::string_view>(names.begin(), names.end()));
  }
  return Status::NotFound(
      fmt::format("queue \"{}\" does not exist yet: no job was ever enqueued to it{}", queue.substr(0, 200), hint));
}

}  // namespace delayq::cli
