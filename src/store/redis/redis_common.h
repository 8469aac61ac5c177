// What the files of the Redis store share: key names, chunk sizes, clocks, script errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "delayq/status.h"
#include "store/redis/redis_client.h"

namespace delayq::redis {

inline constexpr const char* kRegistry = "dq:queues";  // a set of every queue's name
inline constexpr int64_t kRegistryRefreshMs = 10'000;
inline constexpr size_t kChunk = 1000;            // jobs one script call moves at most (promote, replay, ...)
inline constexpr int64_t kConfigFreshMs = 1'000;  // a cached queue config is read again after this

inline int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The hash tag of one shard of a queue: "{q}" unsharded, "{q#3}" for shard 3 of a sharded one.
inline std::string Tag(const std::string& queue, int shard, int shards) {
  return shards > 1 ? queue + "#" + std::to_string(shard) : queue;
}
// The keys of one shard, in the order every script takes them (scripts.h lists them).
inline std::vector<std::string> ShardKeys(const std::string& queue, int shard, int shards) {
  const std::string p = "dq:{" + Tag(queue, shard, shards) + "}:";
  return {p + "due",    p + "jobs",     p + "meta",     p + "ready",    p + "leases", p + "dead",
          p + "keys",   p + "errors",   p + "counters", p + "lateness", p + "config", p + "wake",
          p + "keyttl", p + "kept",     p + "turns",    p + "lane:",    p + "laned",  p + "progress",
          p + "done",   p + "donemeta", p + "results",  p + "waiting"};
}
inline constexpr size_t kMetaKey = 2, kDeadKey = 5, kConfigKey = 10;  // indexes into ShardKeys
// The config hash every server reads a queue's shards and config from (shard 0's tag unsharded).
inline std::string HomeConfigKey(const std::string& queue) { return "dq:{" + queue + "}:config"; }
// A queue's schedules (redis_schedules.cc): name -> record, "#name" -> generation; in the home slot.
inline std::string SchedulesKey(const std::string& queue) { return "dq:{" + queue + "}:schedules"; }
inline constexpr const char* kScheduledRegistry = "dq:scheduled";  // a set of the queues with schedules

// Redis answered a script with an error reply: a bug or a Redis-side limit.
inline Status ScriptError(const Value& v) {
  if (v.str.find("OOM") != std::string::npos) {
    return Status::ResourceExhausted("Redis is out of memory (maxmemory reached): " + v.str);
  }
  if (v.str.find("delayq:FORMAT") != std::string::npos) return Status::Unavailable(v.str);
  return Status::Internal("Redis script error: " + v.str);
}

}  // namespace delayq::redis
