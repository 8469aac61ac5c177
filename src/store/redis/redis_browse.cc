// Browsing on the Redis store (Queue::ListJobs): the browse script reads one page of each shard
// (lua/browse.lua) and this merges them. The twin of engine_browse.cc.
//
// Positions. Scheduled and dead jobs stand at (score, id) in their sorted sets; ready and
// reserved ones at their stream entry (ms, seq), and across the shards of a sharded queue at
// (ms, seq, shard), since two shards' streams can hold the same entry id; after every stream
// position come those of the ready and reserved jobs with a priority or a group (which wait in
// lanes, not the stream) at (due, 'L' id). A shard that stopped early (its page was full, or it
// read its budget of entries) knows nothing past its last position, so the merged page ends at
// the earliest such position.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/page_cursor.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {
namespace {

// Stream entries one shard reads at most for one page (most may be of the other state).
constexpr int64_t kStreamBudget = 5'000;

struct Pos {
  int lanes = 0;  // 1: a job with a priority or a group, listed after the stream's
  int64_t ms = 0;
  std::string tail;  // a job id, a stream sequence zero-padded to 20 digits, or 'L' and a job id
  int shard = 0;
  auto operator<=>(const Pos&) const = default;
};

bool ByStream(JobState s) { return s == JobState::kReady || s == JobState::kReserved; }

char Letter(JobState s) {
  switch (s) {
    case JobState::kScheduled: return 's';
    case JobState::kReady: return 'q';
    case JobState::kReserved: return 'r';
    case JobState::kDead: return 'd';
    case JobState::kCompleted: return 'c';
    case JobState::kCancelled: break;  // refused by ValidateListRequest
  }
  return 's';
}

std::string Padded(std::string_view seq) {
  return std::string(seq.size() < 20 ? 20 - seq.size() : 0, '0') + std::string(seq);
}

bool InLanes(std::string_view tail) { return !tail.empty() && tail[0] == 'L'; }

// A position the browse script answered for a row or its last read, on `shard`.
Pos ScriptPos(int64_t ms, const std::string& tail, bool stream, int shard) {
  if (!stream) return {0, ms, tail, 0};
  if (InLanes(tail)) return {1, ms, tail, 0};  // ids are unique across shards
  return {0, ms, Padded(tail), shard};
}

bool ParseU64(std::string_view text, uint64_t* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// The cursor's position, or why it is not one.
Result<Pos> ParseCursor(const ListRequest& request, int shards) {
  auto at = DecodePageCursor(request.cursor, request.state);
  if (!at.ok()) return at.status();
  Pos pos{0, at->ms, at->tail, 0};
  if (ByStream(request.state) && InLanes(at->tail)) {
    if (!Ulid::Parse(at->tail.substr(1))) return BadPageCursor(request.cursor);
    pos.lanes = 1;
  } else if (ByStream(request.state)) {
    const size_t sep = at->tail.find('_');
    uint64_t seq = 0, shard = 0;
    if (sep == std::string::npos || !ParseU64(std::string_view(at->tail).substr(0, sep), &seq) ||
        !ParseU64(std::string_view(at->tail).substr(sep + 1), &shard) || shard >= static_cast<uint64_t>(shards)) {
      return BadPageCursor(request.cursor);
    }
    pos.tail = Padded(std::to_string(seq));
    pos.shard = static_cast<int>(shard);
  } else if (!Ulid::Parse(at->tail)) {
    return BadPageCursor(request.cursor);
  }
  return pos;
}

std::string CursorOf(JobState state, const Pos& pos) {
  if (!ByStream(state) || pos.lanes) return EncodePageCursor(state, {pos.ms, pos.tail});
  const size_t digits = pos.tail.find_first_not_of('0');
  const std::string seq = digits == std::string::npos ? "0" : pos.tail.substr(digits);
  return EncodePageCursor(state, {pos.ms, fmt::format("{}_{}", seq, pos.shard)});
}

}  // namespace

Result<JobPage> RedisQueue::ListJobs(std::string_view queue_view, const ListRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateListRequest(request));
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const QueueView& q = *info;
  std::optional<Pos> after;
  if (!request.cursor.empty()) {
    auto pos = ParseCursor(request, q.shards);
    if (!pos.ok()) return pos.status();
    after = std::move(*pos);
  }
  const bool stream = ByStream(request.state);
  struct Row {
    Pos pos;
    Value value;
  };
  std::vector<Row> rows;
  std::optional<Pos> bound;  // the earliest last position of a shard that stopped early
  const int64_t shard_bytes = std::max<int64_t>(1, Limits::kMaxListBytes / q.shards);
  for (int shard = 0; shard < q.shards; ++shard) {
    std::vector<std::string> args = {std::string(1, Letter(request.state)),
                                     "",
                                     "",
                                     "0",
                                     std::to_string(request.limit),
                                     std::to_string(kStreamBudget),
                                     std::to_string(shard_bytes)};
    if (after) {
      args[1] = std::to_string(after->ms);
      if (stream && !after->lanes) {
        const size_t digits = after->tail.find_first_not_of('0');
        args[2] = digits == std::string::npos ? "0" : after->tail.substr(digits);
        args[3] = shard > after->shard ? "1" : "0";  // (ms, seq) of a later shard comes after the cursor
      } else {
        args[2] = after->tail;
      }
    }
    auto v = Run(kBrowseScript, q, shard, args);
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    if (v->array.size() != 4) return Status::Internal("the browse script answered a short row");
    const auto& a = v->array;
    for (auto& r : v->array[3].array) {
      if (r.array.size() != 3) return Status::Internal("the browse script answered a short row");
      Pos pos = ScriptPos(r.array[0].AsInt(), r.array[1].str, stream, shard);
      rows.push_back({std::move(pos), std::move(r.array[2])});
    }
    if (a[0].AsInt() == 0) {
      Pos last = ScriptPos(a[1].AsInt(), a[2].str, stream, shard);
      if (!bound || last < *bound) bound = std::move(last);
    }
  }
  std::sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.pos < y.pos; });
  JobPage page;
  int64_t bytes = 0;
  const Pos* last = nullptr;
  size_t i = 0;
  for (; i < rows.size(); ++i) {
    if (bound && *bound < rows[i].pos) break;
    if (static_cast<int32_t>(page.jobs.size()) >= request.limit || bytes >= Limits::kMaxListBytes) break;
    auto job = ToJob(q.name, rows[i].value);
    if (!job.ok()) return job.status();
    bytes += static_cast<int64_t>(rows[i].value.array[2].str.size() + job->result.size());
    last = &rows[i].pos;
    // The state may have moved since the script read it (on another shard's turn): leave it out.
    if (job->state == request.state) page.jobs.push_back(std::move(*job));
  }
  if (i < rows.size()) {
    // Only the bound can stop the walk before its first row.
    page.next_cursor = CursorOf(request.state, last ? *last : *bound);
  } else if (bound) {
    page.next_cursor = CursorOf(request.state, *bound);
  }
  return page;
}

}  // namespace delayq::redis
