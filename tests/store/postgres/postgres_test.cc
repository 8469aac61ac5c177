// The PostgreSQL store against a real PostgreSQL 15: the whole conformance suite, and what only
// this store has (several servers on one database, the schema's versions).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "conformance/queue_conformance.h"
#include "store/postgres/migrate.h"
#include "store/postgres/pg_fixture.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::testing {
namespace {

class PostgresHarness : public QueueHarness {
 public:
  PostgresHarness() : url_(SharedPostgres().NewDatabase()) { Restart(); }
  // Everything is in the database: a new store (another server, as far as it can tell) on it.
  void Restart() override {
    queue_.reset();
    postgres::PostgresQueueOptions o;
    o.url = url_;
    o.pool_size = 4;
    // Far longer than any test step: every wake-up the suite waits for must come from the event
    // that causes it (a notification, an ack, a config change), not from the safety probe.
    o.safety_interval_ms = 60'000;
    auto q = postgres::ScheduledPostgresQueue::Open(o);
    if (!q.ok()) throw std::runtime_error(q.status().ToString());
    queue_ = std::move(*q);
  }
  Queue& queue() override { return *queue_; }
  int64_t NowMs() override {
    auto now = queue_->postgres().DatabaseNowMs();
    if (!now.ok()) throw std::runtime_error(now.status().ToString());
    return *now;
  }
  void Advance(int64_t ms) override { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
  bool exact_time() const override { return false; }
  // This process's CPU and the database's: a store that looks again and again burns both.
  double StoreCpuSeconds() override { return QueueHarness::StoreCpuSeconds() + SharedPostgres().CpuSeconds(); }

 private:
  std::string url_;
  std::unique_ptr<postgres::ScheduledPostgresQueue> queue_;
};

INSTANTIATE_TEST_SUITE_P(Postgres, QueueConformance,
                         ::testing::Values(HarnessFactory{"single",
                                                          [] { return std::make_unique<PostgresHarness>(); }}),
                         HarnessName);

}  // namespace
}  // namespace delayq::testing
