// What the PostgreSQL store's files share: clocks, hex, the column lists of its statements and
// how a row becomes a config or a job's parts.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"
#include "store/postgres/pg_connection.h"

namespace delayq::postgres {

inline int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string HexOf(std::string_view bytes);
std::string FromHex(std::string_view hex);

// The config columns of delayq.queues, in QueueConfig's order (ConfigFromRow reads them from `col`).
inline constexpr const char* kConfigColumns =
    "max_attempts, backoff_base_ms, backoff_factor, backoff_max_ms, backoff_jitter, lease_ms, max_payload, "
    "dead_retention_ms, max_delay_ms, rate_per_s, burst, max_reserved, group_max_reserved, priority_aging_ms, "
    "keep_completed_ms";
QueueConfig ConfigFromRow(const Rows& rows, int row, int col);

// The columns of delayq.jobs a Job shows, in the order JobFromRow reads them.
inline constexpr const char* kJobColumns =
    "id, state, due_at_ms, attempt, max_attempts, key, payload, is_binary, headers, created_at_ms, last_error, "
    "lease_deadline_ms, dead_at_ms, priority, grp, "
    "CASE WHEN state = 'r' AND progress_token = token THEN progress END";  // its delivery's (v4_1_progress.sql)
// How many columns kJobColumns names: what a query selects after them starts at this index.
inline constexpr int kJobColumnCount = 16;
// The same columns of a row of delayq.completed (v5_1_completed.sql): its completed_at_ms where a
// job's dead_at_ms is, its result where a job's progress is.
inline constexpr const char* kCompletedColumns =
    "id, 'c'::\"char\", due_at_ms, attempt, max_attempts, key, payload, is_binary, headers, created_at_ms, "
    "last_error, NULL::bigint, completed_at_ms, priority, grp, result::text";
// The job of that row at `now_ms` (a waiting job is ready once due). Headers are the jsonb's text.
Result<Job> JobFromRow(const std::string& queue, const Rows& rows, int row, int64_t now_ms);

// PostgreSQL keeps text as UTF-8 without NUL: `text` made so (each invalid byte becomes U+FFFD,
// NUL is dropped), at most max_bytes long without splitting a character. For text delayq writes
// that a caller gave (a nack's error).
std::string ValidText(std::string_view text, size_t max_bytes);
// kInvalidArgument when a job's key, group or a header is not UTF-8 (the HTTP API only gives
// UTF-8; a C++ caller could give other bytes, which PostgreSQL cannot keep as text).
Status ValidateText(const EnqueueRequest& r, std::string_view prefix);

// A PostgreSQL text[] literal of `items`, each quoted ('"' and '\\' escaped): any text goes.
std::string TextArray(const std::vector<std::string>& items);

// Headers as the jsonb text the table keeps (NULL: none), and back.
Param HeadersParam(const Headers& headers);
Result<Headers> ParseHeaders(std::string_view json);

}  // namespace delayq::postgres
