// Vacuuming delayq.jobs as jobs churn. Every job is a row inserted, updated when it is delivered
// and deleted when it is acked: three row versions, two of them dead. Autovacuum looks at a table
// at most once a minute (autovacuum_naptime, one setting for the whole server), and in a minute a
// busy queue leaves hundreds of thousands of dead rows: measured here, 100 000 live jobs and 10 000
// churned a second grew the tables to 7.8x their size before autovacuum caught up
// (scripts/bench-pg-churn.sh). So this server asks for a VACUUM itself once the dead rows pass
// its threshold, on a thread of its own so that no delivery waits for it. SKIP_LOCKED: when
// another server (or autovacuum) is vacuuming the table, this one does not queue behind it.
// A role that does not own the table gets PostgreSQL's warning and nothing happens; autovacuum
// still runs.
#include <spdlog/spdlog.h>

#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {

// Whether delayq.jobs holds more dead rows than the threshold (the statistics PostgreSQL keeps,
// which lag the truth by up to a second).
bool PostgresQueue::VacuumDue() {
  auto r = Exec(
      "SELECT n_dead_tup, n_live_tup FROM pg_catalog.pg_stat_user_tables "
      "WHERE relid = 'delayq.jobs'::pg_catalog.regclass");
  if (!r.ok() || r->empty()) return false;
  return r->Int(0, 0) > options_.vacuum_dead_rows + r->Int(0, 1) / 20;
}

void PostgresQueue::VacuumLoop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(options_.vacuum_interval_ms), [&] { return stopping_; });
      if (stopping_) return;
    }
    if (!VacuumDue()) continue;
    const int64_t started = SteadyMs();
    auto done = Exec("VACUUM (SKIP_LOCKED) delayq.jobs");
    if (!done.ok()) {
      spdlog::warn("PostgreSQL: VACUUM of delayq.jobs failed: {}", done.status().message());
    } else {
      spdlog::debug("PostgreSQL: delayq.jobs vacuumed in {} ms", SteadyMs() - started);
    }
  }
}

}  // namespace delayq::postgres
