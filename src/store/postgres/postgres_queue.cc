// The PostgreSQL store's lifecycle, its queue configs and receipts (postgres_queue.h).
#include "store/postgres/postgres_queue.h"

#include <sys/socket.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/errors.h"
#include "core/validate.h"
#include "store/postgres/migrate.h"
#include "store/postgres/pg_common.h"

namespace delayq::postgres {

Result<std::unique_ptr<PostgresQueue>> PostgresQueue::Open(const PostgresQueueOptions& options) {
  std::unique_ptr<PostgresQueue> q(new PostgresQueue(options));
  DELAYQ_RETURN_IF_ERROR(q->Start());
  return q;
}

PostgresQueue::PostgresQueue(PostgresQueueOptions options)
    : options_(std::move(options)),
      pool_(options_.url, std::max<size_t>(options_.pool_size, 2), options_.connect_timeout_s),
      outcomes_(
          {[this](std::string_view queue, const JobRef& ref) { return Get(queue, ref); },
           [this](std::string_view queue, std::string_view id, int64_t wait_ms) { return Watch(queue, id, wait_ms); }}),
      rng_(std::random_device{}()) {}

PostgresQueue::~PostgresQueue() { Close(); }

Status PostgresQueue::Start() {
  DELAYQ_RETURN_IF_ERROR(Prepare());
  // The listener's connection first: a pool that fills a tight connection limit must not keep
  // LISTEN out.
  auto listening = Connection::Open(options_.url, options_.connect_timeout_s);
  listener_ = std::thread(
      [this, c = listening.ok() ? std::move(*listening) : nullptr]() mutable { ListenerLoop(std::move(c)); });
  WarmPool();
  scheduler_ = std::thread([this] { SchedulerLoop(); });
  if (options_.vacuum_dead_rows > 0) vacuumer_ = std::thread([this] { VacuumLoop(); });
  return Status::Ok();
}

// The schema (migrated, or checked current), the store's max_queues, the receipts' secret and the
// database's clock.
Status PostgresQueue::Prepare() {
  auto c = pool_.Take();
  if (!c.ok()) return c.status();
  DELAYQ_RETURN_IF_ERROR(CheckEncoding(**c));
  if (options_.migrate) {
    auto report = Migrate(**c);
    if (!report.ok()) return report.status();
    if (report->to != report->from) {
      spdlog::info("PostgreSQL: delayq schema migrated from version {} to {}", report->from, report->to);
    }
    if (!report->producer_role.empty()) spdlog::warn("PostgreSQL: {}", report->producer_role);
  } else {
    DELAYQ_RETURN_IF_ERROR(CheckSchema(**c));
  }
  DELAYQ_RETURN_IF_ERROR((*c)->Exec("INSERT INTO delayq.meta (name, value) VALUES ('max_queues', $1) "
                                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                                    {Param::Of(static_cast<int64_t>(options_.max_queues))})
                             .status());
  DELAYQ_RETURN_IF_ERROR(LoadReceiptSecret(**c));
  MeasureClock();
  return Status::Ok();
}

// Opens every connection of the pool and readies each for delivery before the first request. A
// new connection is a new PostgreSQL backend, which reads delayq's catalog and compiles its
// functions the first time it calls them: in a fresh server's first burst, the pool's 16 doing
// that at once made the first second's jobs 300 ms late (docs/postgres.md, "Measured here").
// Best effort: a connection that cannot be opened now is opened when it is needed, as before.
void PostgresQueue::WarmPool() {
  std::vector<Pool::Lease> held;  // all lent at once, so that each Take opens a new one
  for (size_t i = 0; i < options_.pool_size; ++i) {
    auto c = pool_.Take(/*wait_at_limit=*/false);
    if (!c.ok()) {
      spdlog::warn("PostgreSQL: {} of {} connections opened at start ({}); the rest open when needed", i,
                   options_.pool_size, c.status().message());
      return;
    }
    // A reserve from no queue, an ack of nothing and a look at the waiting jobs' index: the
    // functions compiled, the tables' and indexes' catalog read, nothing changed. (PL/pgSQL plans
    // a function's statements when each first runs: those of a reserve that takes jobs wait.)
    auto ready = (*c)->Exec(
        "SELECT (SELECT count(*) FROM delayq._reserve(NULL, 0, NULL, 0, '{x}'::text[])) + "
        "(SELECT count(*) FROM delayq._ack(NULL, '{}'::text[], '{}'::text[])) + "
        "(SELECT count(*) FROM (SELECT 1 FROM delayq.jobs WHERE queue = '' AND state = 's' "
        "ORDER BY due_at_ms, id LIMIT 1) j)");
    if (!ready.ok()) spdlog::debug("PostgreSQL: readying a connection failed: {}", ready.status().message());
    held.push_back(std::move(*c));
  }
}

Status PostgresQueue::LoadReceiptSecret(Connection& c) {
  const std::string fresh = HexOf(ReceiptSigner::NewSecret());
  auto v = c.Exec("INSERT INTO delayq.meta (name, value) VALUES ('receipt_secret', $1) ON CONFLICT (name) DO NOTHING; ",
                  {Param::Of(fresh)});
  if (!v.ok()) return v.status();
  auto got = c.Exec("SELECT value FROM delayq.meta WHERE name = 'receipt_secret'");
  if (!got.ok()) return got.status();
  const std::string secret = FromHex(got->Str(0, 0));
  if (secret.size() != ReceiptSigner::kSecretBytes) {
    return Status::Corruption("delayq.meta's receipt_secret is not a delayq receipt secret");
  }
  std::lock_guard lock(mu_);
  signer_ = std::make_shared<const ReceiptSigner>(secret);
  return Status::Ok();
}

// The threads stop first and statements are refused only after them: a waiting reserve the
// scheduler is serving can still give back the jobs it took for a waiter that closing answered.
void PostgresQueue::Close() {
  outcomes_.Close();  // first: its thread reads jobs
  std::vector<Waiter> answered;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    // The listener waits on its socket alone: shutting down the reading side ends that wait now
    // (it used to wake every tenth of a second to look, and a store took that long to close).
    if (listening_socket_ >= 0) (void)::shutdown(listening_socket_, SHUT_RD);
    for (auto& [handle, w] : waiters_) answered.push_back(std::move(w));
    waiters_.clear();
    waiting_.clear();
  }
  cv_.notify_all();
  for (auto& w : answered) w.done(std::vector<Delivery>{});
  if (scheduler_.joinable()) scheduler_.join();
  if (listener_.joinable()) listener_.join();
  if (vacuumer_.joinable()) vacuumer_.join();
  std::lock_guard lock(mu_);
  closed_ = true;
}

Status PostgresQueue::Health() {
  std::lock_guard lock(mu_);
  if (stopping_) return errors::StoreClosed();
  return health_;
}

// Runs `sql` on a borrowed connection, which tells Health() what it found (Borrow).
Result<Rows> PostgresQueue::Exec(std::string_view sql, const std::vector<Param>& params) {
  auto c = Borrow();
  if (!c.ok()) return c.status();
  return (*c)->Exec(sql, params);
}

// Statements run on several threads at once: one that began before the database went away can
// answer after one that found it gone, and must not make Health() say ok again (CI saw it). So
// each borrowed connection is numbered when it is taken, and the latest-numbered one that went
// back says.
Result<PostgresQueue::Held> PostgresQueue::Borrow() {
  uint64_t n = 0;
  {
    std::lock_guard lock(mu_);
    if (closed_) return errors::StoreClosed();
    n = ++statements_;
  }
  auto c = pool_.Take();
  if (!c.ok()) {
    NoteHealth(n, c.status());
    return c.status();
  }
  return Held(this, n, std::move(*c));
}

void PostgresQueue::NoteHealth(uint64_t n, const Status& found) {
  std::lock_guard lock(mu_);
  if (n < health_statement_) return;
  health_statement_ = n;
  health_ = found;
}

Result<int64_t> PostgresQueue::DatabaseNowMs() {
  auto r = Exec("SELECT delayq.now_ms()");
  if (!r.ok()) return r.status();
  return r->Int(0, 0);
}

// The offset taken when the answer is in: the database read its clock before that, so this view
// of its clock runs behind it by at most the round trip, never ahead (a wake-up is then late by
// that, never early).
void PostgresQueue::MeasureClock() {
  auto now = DatabaseNowMs();
  if (!now.ok()) return;
  std::lock_guard lock(mu_);
  clock_offset_ms_ = *now - SteadyMs();
}

int64_t PostgresQueue::DbNowLocked() const { return SteadyMs() + clock_offset_ms_; }

Result<QueueConfig> PostgresQueue::ConfigOf(const std::string& queue) {
  {
    std::lock_guard lock(mu_);
    auto it = configs_.find(queue);
    if (it != configs_.end() && SteadyMs() - it->second.read_at < 1000) return it->second.config;
  }
  auto r = Exec(std::string("SELECT ") + kConfigColumns + " FROM delayq.queues WHERE name = $1", {Param::Of(queue)});
  if (!r.ok()) return r.status();
  if (r->empty()) return errors::UnknownQueue(queue);
  QueueConfig config = ConfigFromRow(*r, 0, 0);
  std::lock_guard lock(mu_);
  configs_[queue] = {config, SteadyMs()};
  return config;
}

void PostgresQueue::ForgetConfig(const std::string& queue) {
  std::lock_guard lock(mu_);
  configs_.erase(queue);
}

void PostgresQueue::AnnounceReady(const std::string& queue) {
  (void)Exec("SELECT pg_notify('delayq', $1 || ' ' || delayq.now_ms())", {Param::Of(queue)});
}

Result<std::unique_ptr<ScheduledPostgresQueue>> ScheduledPostgresQueue::Open(const PostgresQueueOptions& options,
                                                                             std::shared_ptr<Clock> clock) {
  auto store = PostgresQueue::Open(options);
  if (!store.ok()) return store.status();
  ScheduleStore& rows = (*store)->schedule_rows();
  return std::make_unique<ScheduledPostgresQueue>(
      std::move(*store), rows, clock ? std::move(clock) : SystemClock::Instance(), options.schedules);
}

ScheduledPostgresQueue::~ScheduledPostgresQueue() { Close(); }

void ScheduledPostgresQueue::Close() {
  StopSchedules();  // first: its thread calls the store
  postgres().Close();
}

}  // namespace delayq::postgres
