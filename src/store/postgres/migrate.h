// The schema delayq: created and upgraded by versions (`delayq migrate`, and `serve` unless
// --no-migrate). Version N is the SQL files sql/v<N>_*.sql, run in one transaction, after
// which delayq.meta says schema_version N. Servers of one database migrate one at a time (an
// advisory lock), and a server refuses a schema newer than it knows.
#pragma once

#include <string>

#include "delayq/status.h"
#include "store/postgres/pg_connection.h"

namespace delayq::postgres {

// The schema version this build writes and reads.
int CurrentSchemaVersion();

struct MigrateReport {
  int from = 0;  // 0: there was no schema delayq
  int to = 0;
  // Empty, or what an administrator must do for the role delayq_producer (it is missing and this
  // role may not create it). Every migrate grants the role the SQL API once it exists.
  std::string producer_role;
};

// kInvalidArgument unless the database's encoding is UTF8 (a SQL_ASCII database took bytes in
// keys, groups and headers that later failed every reserve of their queue: a hostile pass).
Status CheckEncoding(Connection& c);

// Brings the schema to `target` (at most CurrentSchemaVersion(); tests stop at an older one to
// migrate from it). kIoError naming both versions when the database holds a newer one than this
// build knows (upgrade delayq first); what the server refused otherwise.
Result<MigrateReport> Migrate(Connection& c, int target = CurrentSchemaVersion());
// The database's schema version (0: none), without changing anything.
Result<int> SchemaVersion(Connection& c);
// kOk when the schema is this build's version; else what to do (run delayq migrate, or upgrade).
Status CheckSchema(Connection& c);

}  // namespace delayq::postgres
