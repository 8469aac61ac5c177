// `delayq doctor postgres://...`: the PostgreSQL settings that lose or delay jobs
// (docs/postgres.md), with the fix for each: synchronous_commit or fsync off (a crash loses
// committed jobs), notifications that do not arrive (a pooler in transaction mode, LISTEN refused:
// delivery then waits for the safety probe), idle timeouts that end the listening connection,
// autovacuum off for delayq's tables (they bloat), and a schema not migrated to this delayq.
#pragma once

#include <string>
#include <vector>

#include "delayq/status.h"

namespace delayq::postgres {

struct DoctorFinding {
  std::string setting;
  std::string problem;
  std::string fix;
};

// Connects and reads the settings; kUnavailable (naming the cause, never the password) when the
// database cannot be reached. An empty list: nothing found.
Result<std::vector<DoctorFinding>> Doctor(const std::string& url);

}  // namespace delayq::postgres
