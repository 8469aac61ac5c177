#include "store/postgres/migrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "store/postgres/sql_sources.h"

namespace delayq::postgres {
namespace {

// Every delayq server of a database takes this advisory lock to migrate (pg_advisory_lock's key).
constexpr int64_t kMigrateLock = 0x64656c617971;  // "delayq"

int VersionOf(const char* name) { return name[0] == 'v' ? std::atoi(name + 1) : 0; }

}  // namespace

int CurrentSchemaVersion() {
  int v = 0;
  for (int i = 0; i < kSqlSourceCount; ++i) v = std::max(v, VersionOf(kSqlSources[i].name));
  return v;
}

Result<int> SchemaVersion(Connection& c) {
  auto has = c.Exec("SELECT to_regclass('delayq.meta') IS NOT NULL");
  if (!has.ok()) return has.status();
  if (!has->Bool(0, 0)) return 0;
  auto v = c.Exec("SELECT value FROM delayq.meta WHERE name = 'schema_version'");
  if (!v.ok()) return v.status();
  return v->empty() ? 0 : static_cast<int>(std::atoll(v->Str(0, 0).c_str()));
}

Status CheckSchema(Connection& c) {
  auto v = SchemaVersion(c);
  if (!v.ok()) return v.status();
  const int want = CurrentSchemaVersion();
  if (*v == want) return Status::Ok();
  if (*v > want) {
    return Status::IoError(fmt::format(
        "the database holds delayq schema version {}, newer than this delayq's {}; upgrade delayq", *v, want));
  }
  return Status::IoError(fmt::format(
      "the database holds delayq schema version {}; this delayq needs {}: run delayq migrate (or serve without "
      "--no-migrate)",
      *v, want));
}

Status CheckEncoding(Connection& c) {
  auto encoding = c.Exec("SELECT current_setting('server_encoding')");
  if (!encoding.ok()) return encoding.status();
  const std::string name = encoding->Str(0, 0);
  if (name == "UTF8") return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "the database's encoding is {}; delayq needs a UTF8 database (payloads, keys, groups and headers are UTF-8 "
      "text, and {} would keep bytes that are not): CREATE DATABASE <name> ENCODING 'UTF8' TEMPLATE template0",
      name, name));
}

Result<MigrateReport> Migrate(Connection& c, int target) {
  DELAYQ_RETURN_IF_ERROR(CheckEncoding(c));  // `delayq migrate` comes here without the store
  // Another server's migration is waited for however long it takes (the session's lock_timeout,
  // pg_connection.cc, is for the locks applications hold): the advisory lock, a session's, is
  // taken in a transaction whose SET LOCAL goes with it. The migration's own statements keep it.
  DELAYQ_RETURN_IF_ERROR(InTransaction(c, [&]() -> Status {
    DELAYQ_RETURN_IF_ERROR(c.Run("SET LOCAL lock_timeout = 0"));
    return c.Exec("SELECT pg_advisory_lock($1)", {Param::Of(kMigrateLock)}).status();
  }));
  auto unlock = [&] { (void)c.Exec("SELECT pg_advisory_unlock($1)", {Param::Of(kMigrateLock)}); };
  auto from = SchemaVersion(c);
  if (!from.ok()) {
    unlock();
    return from.status();
  }
  MigrateReport report{*from, *from};
  const int want = CurrentSchemaVersion();
  if (*from > want) {
    unlock();
    return CheckSchema(c);
  }
  for (int version = *from + 1; version <= std::min(target, want); ++version) {
    Status s = InTransaction(c, [&]() -> Status {
      for (int i = 0; i < kSqlSourceCount; ++i) {
        if (VersionOf(kSqlSources[i].name) != version) continue;
        if (Status r = c.Run(kSqlSources[i].text); !r.ok()) {
          return Status(r.code(), fmt::format("migrating to delayq schema version {} ({}.sql): {}", version,
                                              kSqlSources[i].name, r.message()));
        }
      }
      return c
          .Exec(
              "INSERT INTO delayq.meta (name, value) VALUES ('schema_version', $1) "
              "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
              {Param::Of(static_cast<int64_t>(version))})
          .status();
    });
    if (!s.ok()) {
      unlock();
      return s;
    }
    report.to = version;
  }
  auto granted = c.Exec("SELECT delayq._grant_producer()");
  unlock();
  if (!granted.ok()) return granted.status();
  report.producer_role = granted->Str(0, 0);
  return report;
}

}  // namespace delayq::postgres
