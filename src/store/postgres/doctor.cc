#include "store/postgres/doctor.h"

#include <fmt/format.h>
#include <poll.h>

#include <chrono>

#include "store/postgres/migrate.h"
#include "store/postgres/pg_connection.h"

namespace delayq::postgres {
namespace {

Result<std::string> Setting(Connection& c, const char* name) {
  auto r = c.Exec("SELECT current_setting($1, true)", {Param::Of(name)});
  if (!r.ok()) return r.status();
  return r->Str(0, 0);
}

// Whether a NOTIFY this connection sends reaches it again within a second (LISTEN works end to
// end: no pooler in between that drops it).
bool NotificationsArrive(Connection& c) {
  if (!c.Run("LISTEN delayq_doctor").ok()) return false;
  if (!c.Run("NOTIFY delayq_doctor, 'ping'").ok()) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  pollfd fd{c.socket(), POLLIN, 0};
  while (std::chrono::steady_clock::now() < until) {
    if (PQconsumeInput(c.raw()) == 0) return false;
    if (PGnotify* n = PQnotifies(c.raw())) {
      PQfreemem(n);
      (void)c.Run("UNLISTEN delayq_doctor");
      return true;
    }
    (void)::poll(&fd, 1, 50);
  }
  return false;
}

void CheckDurability(Connection& c, std::vector<DoctorFinding>& out) {
  auto sync = Setting(c, "synchronous_commit");
  if (sync.ok() && *sync == "off") {
    out.push_back({"synchronous_commit",
                   "is off: a crash of PostgreSQL loses the last commits, jobs acknowledged to "
                   "producers among them",
                   "ALTER SYSTEM SET synchronous_commit = on (or ALTER ROLE <the role of this URL> SET "
                   "synchronous_commit = on)"});
  }
  auto fsync = Setting(c, "fsync");
  if (fsync.ok() && *fsync == "off") {
    out.push_back({"fsync", "is off: a crash of the machine can lose or corrupt every job",
                   "set fsync = on in postgresql.conf and restart PostgreSQL"});
  }
}

void CheckTimeouts(Connection& c, std::vector<DoctorFinding>& out) {
  auto idle = Setting(c, "idle_session_timeout");
  if (idle.ok() && !idle->empty() && *idle != "0") {
    out.push_back({"idle_session_timeout",
                   fmt::format("is {}: it ends delayq's listening connection whenever no job comes for that long; "
                               "wake-ups are then lost until it reconnects (at most the safety interval late)",
                               *idle),
                   "ALTER ROLE <the role of this URL> SET idle_session_timeout = 0"});
  }
  auto in_tx = Setting(c, "idle_in_transaction_session_timeout");
  if (in_tx.ok() && !in_tx->empty() && *in_tx != "0") {
    auto ms =
        c.Exec("SELECT extract(epoch FROM current_setting('idle_in_transaction_session_timeout')::interval) * 1000");
    if (ms.ok() && ms->Double(0, 0) < 60'000) {
      out.push_back({"idle_in_transaction_session_timeout",
                     fmt::format("is {}: under a minute, it can end an application's transaction that enqueues and "
                                 "then waits on other work, and with it the enqueue",
                                 *in_tx),
                     "ALTER ROLE <the role of this URL> SET idle_in_transaction_session_timeout = '5min' (or 0)"});
    }
  }
}

void CheckVacuum(Connection& c, std::vector<DoctorFinding>& out) {
  auto on = Setting(c, "autovacuum");
  if (on.ok() && *on == "off") {
    out.push_back({"autovacuum",
                   "is off: delayq's tables churn (every job is inserted, updated and deleted) and grow "
                   "without bound",
                   "ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf()"});
  }
  auto tables = c.Exec(
      "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'delayq' "
      "AND c.relkind = 'r' AND 'autovacuum_enabled=false' = ANY (coalesce(c.reloptions, '{}'))");
  if (!tables.ok()) return;
  for (int i = 0; i < tables->size(); ++i) {
    out.push_back({"delayq." + tables->Str(i, 0), "has autovacuum_enabled=false: it grows without bound as jobs churn",
                   fmt::format("ALTER TABLE delayq.{} RESET (autovacuum_enabled)", tables->Str(i, 0))});
  }
}

}  // namespace

Result<std::vector<DoctorFinding>> Doctor(const std::string& url) {
  auto c = Connection::Open(url, 5);
  if (!c.ok()) return c.status();
  std::vector<DoctorFinding> out;
  CheckDurability(**c, out);
  if (!NotificationsArrive(**c)) {
    out.push_back({"LISTEN/NOTIFY",
                   "a notification sent on this connection did not come back within a second (LISTEN refused, or a "
                   "pooler such as PgBouncer in transaction mode in between): jobs are then found by the safety probe, "
                   "up to a second late",
                   "connect delayq to PostgreSQL directly, or through a pooler in session mode"});
  }
  if (Status s = CheckEncoding(**c); !s.ok()) {
    out.push_back({"server_encoding", s.message(), "move delayq's schema to a UTF8 database"});
  }
  CheckTimeouts(**c, out);
  CheckVacuum(**c, out);
  // The application's role (docs/postgres.md says to check it too) may not read delayq's tables:
  // its settings are what counts then, and "run delayq migrate" would send it to do what it may
  // not (a hostile try found that).
  auto readable =
      (*c)->Exec("SELECT to_regclass('delayq.meta') IS NULL OR has_table_privilege('delayq.meta', 'SELECT')");
  if (readable.ok() && !readable->Bool(0, 0)) return out;
  if (Status s = CheckSchema(**c); !s.ok()) {
    out.push_back({"schema delayq", s.message(), "delayq migrate " + RedactUrl(url)});
  }
  return out;
}

}  // namespace delayq::postgres
