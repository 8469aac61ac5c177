// `delayq doctor URL`: the Redis settings that lose or delay jobs (SPEC 5.2), with the fix for
// each: maxmemory-policy other than noeviction, no AOF or a lax appendfsync, Redis older than
// 6.2, a cluster with unserved slots.
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
// Connects to `url` (redis:// or redis-cluster://) and reads every master; kUnavailable when it
// cannot be reached. An empty list: nothing found.
Result<std::vector<DoctorFinding>> Doctor(std::string_view url);

}  // namespace delayq::redis
