// The cursor of a job listing (Queue::ListJobs): where the page before ended.
//
// On the wire it is opaque; inside it is "state.ms.tail": the state it lists, a time in ms (due
// or dead time, or a Redis stream entry's time) and a store's tie-breaker after it (a job id, or
// a stream sequence and shard). The listing continues strictly after (ms, tail).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {

struct PageCursor {
  int64_t ms = 0;
  std::string tail;  // 1..40 of [0-9A-Za-z_-]
};

std::string EncodePageCursor(JobState state, const PageCursor& at);
// kInvalidArgument, naming the cursor and saying what would be right, for text that is not a
// cursor of a listing of `state`.
Result<PageCursor> DecodePageCursor(std::string_view text, JobState state);
// The error for a cursor whose tail the store cannot read (DecodePageCursor accepted its form).
Status BadPageCursor(std::string_view text);
// A page limit within 1..Limits::kMaxListPage.
Status ValidateListRequest(const ListRequest& request);

}  // namespace delayq
