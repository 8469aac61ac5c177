#include "server/store.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>

#include "core/redact.h"
#include "delayq/engine.h"
#include "store/postgres/pg_connection.h"
#include "store/postgres/postgres_queue.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_queue.h"

namespace delayq::server {
namespace {

// Redis' password when the URL has none: --redis-password-file (its first line), else the
// environment's DELAYQ_REDIS_PASSWORD; empty when neither is given.
Result<std::string> RedisPassword(const ServeOptions& o) {
  if (!o.redis_password_file.empty()) {
    std::ifstream in(o.redis_password_file);
    std::string line;
    if (!in || !std::getline(in, line)) {
      return Status::InvalidArgument(
          fmt::format("cannot read the Redis password from --redis-password-file \"{}\"", o.redis_password_file));
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    return line;
  }
  const char* env = std::getenv("DELAYQ_REDIS_PASSWORD");
  return std::string(env ? env : "");
}

}  // namespace

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
    const auto opened = std::chrono::steady_clock::now();
    auto told = std::make_shared<std::once_flag>();  // close may be called more than once
    out.close = [raw, opened, told] {
      raw->Close();
      std::call_once(*told, [&] {
        // How much the engine's one lock was used over the run (docs/performance.md): held for a
        // small share of the time, it does not limit the server.
        const EngineInfo info = raw->Info();
        const double run_us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - opened).count();
        spdlog::info("engine lock: {} operations ({} found it taken), held {:.1f} % of the run, waited for {:.1f} ms",
                     info.lock_acquisitions, info.lock_contended,
                     run_us > 0 ? 100.0 * static_cast<double>(info.lock_held_us) / run_us : 0.0,
                     static_cast<double>(info.lock_wait_us) / 1000.0);
      });
    };
    out.description = fmt::format("embedded in {}, durability {}", o.data, DurabilityName(o.durability));
    out.kind = "embedded";
    out.durability = DurabilityName(o.durability);
    return out;
  }
  if (o.store.rfind("redis", 0) == 0 && o.store.find("://") != std::string::npos) {
    redis::RedisQueueOptions redis_options;
    redis_options.url = o.store;
    auto password = RedisPassword(o);
    if (!password.ok()) return password.status();
    redis_options.password = std::move(*password);
    redis_options.shards = o.redis_shards;
    redis_options.wait_replicas = o.redis_wait_replicas;
    redis_options.wait_timeout_ms = o.redis_wait_timeout_ms;
    redis_options.max_queues = o.max_queues;
    auto redis = redis::ScheduledRedisQueue::Open(redis_options);
    if (!redis.ok()) return redis.status();
    redis::ScheduledRedisQueue* raw = redis->get();
    out.queue = std::move(*redis);
    out.close = [raw] { raw->Close(); };
    out.kind = o.store.find("-cluster://") != std::string::npos    ? "redis-cluster"
               : o.store.find("-sentinel://") != std::string::npos ? "redis-sentinel"
                                                                   : "redis";
    out.durability = "redis";
    out.description = fmt::format(
        "Redis at {}{}{}", redis::RedisUrl::Redacted(o.store),
        o.redis_shards > 1 ? fmt::format(", {} shards per new queue", o.redis_shards) : "",
        o.redis_wait_replicas > 0 ? fmt::format(", writes wait for {} replica(s)", o.redis_wait_replicas) : "");
    return out;
  }
  if (postgres::IsPostgresUrl(o.store)) {
    postgres::PostgresQueueOptions pg;
    pg.url = o.store;
    pg.migrate = !o.no_migrate;
    pg.max_queues = o.max_queues;
    auto store = postgres::ScheduledPostgresQueue::Open(pg);
    if (!store.ok()) return store.status();
    postgres::ScheduledPostgresQueue* raw = store->get();
    out.queue = std::move(*store);
    out.close = [raw] { raw->Close(); };
    out.kind = "postgres";
    out.durability = "postgres";
    out.description = fmt::format("PostgreSQL at {}", postgres::RedactUrl(o.store));
    return out;
  }
  return Status::InvalidArgument(
      fmt::format("--store \"{}\" is not embedded, postgres://USER:PASSWORD@HOST:PORT/DB, redis://HOST:PORT (rediss:// "
                  "for TLS), redis-sentinel://HOST:PORT,.../MASTER "
                  "or redis-cluster://HOST:PORT,...",
                  RedactSecrets(o.store)));
}

}  // namespace delayq::server
