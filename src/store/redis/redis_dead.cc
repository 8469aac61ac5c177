// The dead-letter queue on the Redis store: replay, purge. (The sweep of dead jobs past
// their retention is the scheduler's: redis_scheduler.cc.) The twin of engine_dead.cc.
#include <fmt/format.h>

#include <algorithm>

#include "core/errors.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {

Result<int64_t> RedisQueue::ReplayDead(std::string_view queue_view, std::span<const std::string> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!Ulid::Parse(ids[i])) return errors::NotAJobId(fmt::format("ids[{}]", i), ids[i]);
  }
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const QueueView& q = *info;
  int64_t replayed = 0;
  for (int shard = 0; shard < q.shards; ++shard) {
    if (!ids.empty()) {  // the given ids of this shard (one given twice is replayed once)
      std::vector<std::string> args = {"0"};
      for (const auto& id : ids) {
        const Ulid parsed = *Ulid::Parse(id);
        if (q.ShardOfId(parsed) == shard) args.push_back(parsed.ToString());
      }
      if (args.size() == 1) continue;
      auto v = Run(kReplayScript, q, shard, args, true);
      if (!v.ok()) return v.status();
      if (v->is_error()) return ScriptError(*v);
      replayed += v->AsInt();
      continue;
    }
    // All: at most the dead jobs there were when the replay began, kChunk per script call.
    const std::string key = ShardKeys(q.name, shard, q.shards)[kDeadKey];
    auto count = Call(key, {"ZCARD", key});
    if (!count.ok()) return count.status();
    int64_t budget = count->AsInt();
    while (budget > 0) {
      auto v = Run(kReplayScript, q, shard, {std::to_string(std::min<int64_t>(budget, kChunk))}, true);
      if (!v.ok()) return v.status();
      if (v->is_error()) return ScriptError(*v);
      if (v->AsInt() == 0) break;
      replayed += v->AsInt();
      budget -= v->AsInt();
    }
  }
  NoteReady(q.name);
  return replayed;
}

Result<int64_t> RedisQueue::PurgeDead(std::string_view queue_view) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  int64_t purged = 0;
  for (int shard = 0; shard < info->shards; ++shard) {
    while (true) {
      auto v = Run(kPurgeScript, *info, shard, {std::to_string(kChunk)}, true);
      if (!v.ok()) return v.status();
      if (v->is_error()) return ScriptError(*v);
      purged += v->AsInt();
      if (v->AsInt() < static_cast<int64_t>(kChunk)) break;
    }
  }
  return purged;
}

}  // namespace delayq::redis
