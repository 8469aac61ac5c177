// Opens the store `delayq serve` runs on: the embedded engine, Redis (Sentinel, Cluster) or PostgreSQL.
#pragma once

#include <functional>
#include <memory>

#include "delayq/queue.h"
#include "server/serve.h"

namespace delayq::server {

struct OpenedStore {
  std::unique_ptr<Queue> queue;
  std::function<void()> close;  // answers waiting reserves, flushes; idempotent
  std::string description;      // "embedded in ./delayq-data, durability sync"
  std::string kind;             // embedded | redis | redis-cluster
  std::string durability;       // sync | interval | none; "redis" (Redis' own settings)
};

Result<OpenedStore> OpenStore(const ServeOptions& options);

}  // namespace delayq::server
