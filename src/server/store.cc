#include "server/store.h"

#include <fmt/format.h>

#include "delayq/engine.h"
#include "store/redis/redis_queue.h"

namespace delayq::server {

Result<OpenedStore> OpenStore(const ServeOptions& o) {
  OpenedStore out;
  if (o.store == "embedded") {
    EngineOptions engine_options;
    engine_options.path = o.data;
    engine_options.durability = o.durability;
    engine_options.sync_interval_ms = o.sync_interval_ms;
    engine_options.max_queues = o.max_queues;
    auto engine = Engine::Open(engine_options);
    if (!engine.ok()) return engine.status();
    Engine* raw = engine->get();
    out.queue = std::move(*engine);
    out.close = [raw] { raw->Close(); };
    out.description = fmt::format("embedded in {}, durability {}", o.data, DurabilityName(o.durability));
    out.kind = "embedded";
    out.durability = DurabilityName(o.durability);
    return out;
  }
  if (o.store.rfind("redis://", 0) == 0 || o.store.rfind("redis-cluster://", 0) == 0) {
    redis::RedisQueueOptions redis_options;
    redis_options.url = o.store;
    redis_options.shards = o.redis_shards;
    redis_options.wait_replicas = o.redis_wait_replicas;
    redis_options.wait_timeout_ms = o.redis_wait_timeout_ms;
    redis_options.max_queues = o.max_queues;
    auto redis = redis::RedisQueue::Open(redis_options);
    if (!redis.ok()) return redis.status();
    redis::RedisQueue* raw = redis->get();
    out.queue = std::move(*redis);
    out.close = [raw] { raw->Close(); };
    out.kind = o.store.rfind("redis-cluster://", 0) == 0 ? "redis-cluster" : "redis";
    out.durability = "redis";
    out.description = fmt::format(
        "Redis at {}{}{}", o.store, o.redis_shards > 1 ? fmt::format(", {} shards per new queue", o.redis_shards) : "",
        o.redis_wait_replicas > 0 ? fmt::format(", writes wait for {} replica(s)", o.redis_wait_replicas) : "");
    return out;
  }
  return Status::InvalidArgument(
      fmt::format("--store \"{}\" is not embedded, redis://HOST:PORT or redis-cluster://HOST:PORT,...", o.store));
}

}  // namespace delayq::server
