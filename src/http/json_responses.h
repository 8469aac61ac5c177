// Reading the API's response bodies (the C++ client's half of the wire format). Each parser
// mirrors a writer in json.h; the round trip is tested in tests/http/json_test.cc.
#pragma once

#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq::http {

// A non-2xx answer as a Status: {"error":{"code","message"}}, or the bare HTTP status.
Status ParseErrorResponse(int http_status, std::string_view body);

Result<std::vector<EnqueueResult>> ParseEnqueueResponse(std::string_view body);  // one or batch
Result<Job> ParseJobResponse(std::string_view body);
Result<std::vector<Job>> ParseJobListResponse(std::string_view body);          // {"jobs":[job]}
Result<std::vector<Delivery>> ParseReserveResponse(std::string_view body);
Result<QueueStats> ParseStatsResponse(std::string_view body);
Result<std::vector<QueueStats>> ParseQueuesResponse(std::string_view body);
Result<NackResult> ParseNackResponse(std::string_view body);
Result<TouchResult> ParseTouchResponse(std::string_view body);
// {"acked": n, "failed": [{"receipt","code","message"}]}: one Status per receipt.
Result<std::vector<Status>> ParseBatchResponse(std::string_view body,
                                               const std::vector<std::string>& receipts);
Result<ScheduleHistogram> ParseScheduleResponse(std::string_view body);
Result<int64_t> ParseCountResponse(std::string_view body, std::string_view field);

}  // namespace delayq::http
