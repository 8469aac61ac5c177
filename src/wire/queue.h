// Queues on the wire: stats (GET /v1/queues/{q}; the list GET /v1/queues as {"queues": [...]}),
// config (GET and PUT /v1/queues/{q}/config), the schedule histogram (GET .../schedule), dead-list
// replay ({"ids": [...]}, none = all) and the count answers ({"replayed": n}, {"purged": n}, ...).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"
#include "wire/json_writer.h"

namespace delayq::wire {

void WriteStats(JsonWriter& w, const QueueStats& stats);
std::string WriteStatsResponse(const QueueStats& stats);
std::string WriteQueuesResponse(std::span<const QueueStats> queues);
Result<QueueStats> ParseStatsResponse(std::string_view body);
Result<std::vector<QueueStats>> ParseQueuesResponse(std::string_view body);

void WriteConfig(JsonWriter& w, const QueueConfig& config);
std::string WriteConfigBody(const QueueConfig& config);  // PUT's body and GET's answer
// A config as PUT gives it: the fields given replace `base`'s (every store then validates it).
// A request (kClosed) refuses a field it does not know; an answer (kOpen, the client reading
// GET .../config) skips it, as a newer server may send more.
enum class Fields { kClosed, kOpen };
Result<QueueConfig> ParseConfig(std::string_view body, const QueueConfig& base, Fields fields = Fields::kClosed);

std::string WriteScheduleResponse(const ScheduleHistogram& histogram);
Result<ScheduleHistogram> ParseScheduleResponse(std::string_view body);

std::string WriteReplayRequest(std::span<const std::string> ids);
Result<std::vector<std::string>> ParseReplayRequest(std::string_view body);  // empty body: all

std::string WriteCountResponse(std::string_view field, int64_t n);
Result<int64_t> ParseCountResponse(std::string_view body, std::string_view field);

}  // namespace delayq::wire
