// `delayq doctor URL`: the Redis settings that lose or delay jobs (docs/operations.md), with the
// fix for each: maxmemory-policy other than noeviction, no AOF or a lax appendfsync, Redis older
// than 6.2, a cluster with unserved slots; and how delayq reaches it (TLS, AUTH, Sentinel).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::redis {

struct DoctorFinding {
  std::string node;
  std::string problem;
  std::string fix;
};
// Connects to `url` (every form RedisUrl takes; `password` when the URL gives none) and reads every
// master, and the Sentinels of a redis-sentinel:// URL; kUnavailable when it cannot be reached,
// kUnauthenticated when Redis refuses the password (both name the cause, never the password). An
// empty list: nothing found. Besides the settings that lose jobs, it names an unencrypted or
// unchecked connection to a host that is not this one, a Redis that takes commands without a
// password, and Sentinels that cannot agree on a failover.
Result<std::vector<DoctorFinding>> Doctor(std::string_view url, const std::string& password = "");

}  // namespace delayq::redis
