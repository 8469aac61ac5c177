// The PostgreSQL store's two threads: the listener (LISTEN delayq: which queues have jobs coming
// due) and the scheduler (serves waiting reserves when their jobs come due, ends leases that ran
// out, deletes dead jobs past retention). Both keep to this process: everything they change is one
// statement any server could run at the same time.
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/errors.h"
#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {

void PostgresQueue::Poke() {
  std::lock_guard lock(mu_);
  poked_ = true;
  cv_.notify_all();
}

void PostgresQueue::NoteLease(int64_t deadline_ms) {
  if (deadline_ms == Clock::kNever) return;
  std::lock_guard lock(mu_);
  if (next_lease_.Note(deadline_ms)) {
    poked_ = true;
    cv_.notify_all();
  }
}

void PostgresQueue::NoteDeath(const std::string& queue, int64_t dead_at_ms) {
  auto config = ConfigOf(queue);
  if (!config.ok()) return;
  std::lock_guard lock(mu_);
  const int64_t at = dead_at_ms + config->dead_retention_ms;
  if (next_sweep_.Note(at)) {
    poked_ = true;
    cv_.notify_all();
  }
}

void PostgresQueue::SchedulerLoop() {
  int64_t next_safety = 0;  // steady ms
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const int64_t steady = SteadyMs(), db_now = DbNowLocked();
    std::vector<ReserveCallback> expired;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline > steady) {
        ++it;
        continue;
      }
      auto line = waiting_.find(it->second.queue);
      if (line != waiting_.end()) {
        std::erase(line->second, it->first);
        if (line->second.empty()) waiting_.erase(line);
      }
      expired.push_back(std::move(it->second.done));
      it = waiters_.erase(it);
    }
    const bool safety = steady >= next_safety;
    if (safety) {
      next_safety = steady + options_.safety_interval_ms;
      for (const auto& [queue, line] : waiting_) to_serve_.insert(queue);
    }
    for (auto it = wake_at_.begin(); it != wake_at_.end();) {
      if (it->second <= db_now || !waiting_.contains(it->first)) {
        if (it->second <= db_now) to_serve_.insert(it->first);
        it = wake_at_.erase(it);
      } else {
        ++it;
      }
    }
    std::set<std::string, std::less<>> serve;
    serve.swap(to_serve_);
    const bool reap = next_lease_.By(db_now) || safety;
    const bool sweep = next_sweep_.By(db_now) || safety;
    if (reap) next_lease_.Launched();  // notes from now on are kept beside the reap's answer
    if (sweep) next_sweep_.Launched();
    poked_ = false;
    lock.unlock();
    for (auto& done : expired) done(std::vector<Delivery>{});
    if (reap) ReapLeases();
    if (sweep) Sweep();
    if (safety) MeasureClock();
    for (const auto& queue : serve) ServeWaiters(queue);
    lock.lock();
    if (poked_ || !to_serve_.empty()) continue;
    int64_t until = next_safety;
    for (const auto& [handle, w] : waiters_) until = std::min(until, w.deadline);
    for (const auto& [queue, at] : wake_at_) until = std::min(until, at - clock_offset_ms_);
    if (next_lease_.at != Clock::kNever) until = std::min(until, next_lease_.at - clock_offset_ms_);
    if (next_sweep_.at != Clock::kNever) until = std::min(until, next_sweep_.at - clock_offset_ms_);
    const int64_t wait = until - SteadyMs();
    if (wait > 0) cv_.wait_for(lock, std::chrono::milliseconds(wait), [&] { return stopping_ || poked_; });
  }
}

void PostgresQueue::ServeWaiters(const std::string& queue) {
  for (;;) {
    ReserveRequest request;
    uint64_t handle = 0;
    {
      std::lock_guard lock(mu_);
      auto line = waiting_.find(queue);
      if (stopping_ || line == waiting_.end() || line->second.empty()) return;
      handle = line->second.front();
      request = waiters_.at(handle).request;
    }
    int64_t look_again = Clock::kNever;
    auto got = ReserveNow(queue, request, &look_again);
    ReserveCallback done;
    {
      std::lock_guard lock(mu_);
      auto it = waiters_.find(handle);
      if (it != waiters_.end() && (!got.ok() || !got->empty())) {
        done = std::move(it->second.done);
        auto line = waiting_.find(queue);
        std::erase(line->second, handle);
        if (line->second.empty()) waiting_.erase(line);
        waiters_.erase(it);
      }
    }
    if (done) {
      done(std::move(got));
      continue;
    }
    if (got.ok() && !got->empty()) {  // its waiter was cancelled meanwhile: the jobs go back
      std::vector<std::string> receipts;
      for (const auto& d : *got) receipts.push_back(d.receipt);
      (void)ReleaseBatch(queue, receipts);
      continue;
    }
    if (!got.ok()) return;              // the waiter was cancelled, or its answer was given
    if (look_again != Clock::kNever) {  // held back by the rate: look again when a token comes
      std::lock_guard lock(mu_);
      auto [at, fresh] = wake_at_.emplace(queue, look_again);
      if (!fresh) at->second = std::min(at->second, look_again);
    }
    // Nothing ready: look again when the next job comes due (notifications say so too).
    auto next = Exec(kNextDueSql, {Param::Of(queue)});
    if (next.ok() && !next->empty()) {
      std::lock_guard lock(mu_);
      auto [at, fresh] = wake_at_.emplace(queue, next->Int(0, 0));
      if (!fresh) at->second = std::min(at->second, next->Int(0, 0));
    }
    return;
  }
}

void PostgresQueue::ReapLeases() {
  constexpr int kPerTurn = 1000;
  auto r = Exec("SELECT queue, id, died, attempt, last_error FROM delayq._reap($1)",
                {Param::Of(static_cast<int64_t>(kPerTurn))});
  if (!r.ok()) {  // the database is away: try again after the safety interval, not at once
    std::lock_guard lock(mu_);
    next_lease_.Answered(DbNowLocked() + options_.safety_interval_ms);
    return;
  }
  std::set<std::string> touched;
  std::vector<std::string> died;
  {
    std::lock_guard lock(mu_);
    for (int i = 0; i < r->size(); ++i) {
      const std::string queue = r->Str(i, 0);
      Metrics& m = MetricsLocked(queue);
      if (r->Bool(i, 2)) {
        ++m.counters.dead;
        died.push_back(queue);
        spdlog::warn("{}",
                     errors::DeadJobWarning(queue, r->Str(i, 1), static_cast<int32_t>(r->Int(i, 3)), r->Str(i, 4)));
      } else {
        ++m.counters.redelivered;
      }
      touched.insert(queue);
    }
  }
  for (const auto& queue : touched) AnnounceReady(queue);  // requeued jobs, or room under max_reserved
  if (!died.empty()) {
    auto now = DatabaseNowMs();
    for (const auto& queue : died) NoteDeath(queue, now.ok() ? *now : 0);
  }
  auto next = Exec("SELECT min(lease_deadline_ms), delayq.now_ms() FROM delayq.jobs WHERE state = 'r'");
  if (options_.after_reap_for_test) options_.after_reap_for_test();
  std::lock_guard lock(mu_);
  if (r->size() == kPerTurn) {
    next_lease_.Note(DbNowLocked());  // more to do at once (a safety probe's reap, too)
    poked_ = true;
  } else if (!next.ok()) {
    next_lease_.Answered(DbNowLocked() + options_.safety_interval_ms);
  } else {
    int64_t at = next->IsNull(0, 0) ? Clock::kNever : next->Int(0, 0);
    // A lease already over that this reap could not take is another's (a server reaping it, or
    // a transaction holding the row): look again a little later, not at once.
    if (at <= next->Int(0, 1)) at = next->Int(0, 1) + 50;
    next_lease_.Answered(at);
  }
}

// How long after its ack a completed job is kept, in SQL over a row `q` of delayq.queues: the C++
// rule (CompletedSweepAfterMs), written out here with its hold, so the two cannot drift apart.
namespace {
std::string SweepAfter() {
  return fmt::format("(CASE WHEN q.keep_completed_ms > 0 THEN q.keep_completed_ms ELSE {} END)",
                     Limits::kOutcomeHoldMs);
}
}  // namespace

// Dead jobs past their queue's retention go, completed jobs past keep_completed_ms, and kept keys
// past their time; then the next retention to run out (per queue an index probe of its oldest
// death and its oldest completion).
void PostgresQueue::Sweep() {
  const bool deleted = Exec(
                           "DELETE FROM delayq.jobs j USING delayq.queues q WHERE j.queue = q.name AND "
                           "j.state = 'd' AND j.dead_at_ms <= delayq.now_ms() - q.dead_retention_ms")
                           .ok() &&
                       Exec(
                           "DELETE FROM delayq.completed c USING delayq.queues q WHERE c.queue = q.name AND "
                           "c.completed_at_ms <= delayq.now_ms() - " +
                           SweepAfter())
                           .ok() &&
                       Exec("DELETE FROM delayq.kept_keys WHERE until_ms <= delayq.now_ms()").ok();
  auto next = Exec(
      "SELECT least(min((SELECT min(j.dead_at_ms) FROM delayq.jobs j WHERE j.queue = q.name AND j.state = 'd') "
      "+ q.dead_retention_ms), min((SELECT min(c.completed_at_ms) FROM delayq.completed c WHERE c.queue = q.name) "
      "+ " +
      SweepAfter() + ")) FROM delayq.queues q");
  // The database away, read-only (a standby, a full disk) or the delete past statement_timeout:
  // try again after the safety interval, not at once (the next retention is still past then).
  std::lock_guard lock(mu_);
  next_sweep_.Answered(!deleted || !next.ok() ? DbNowLocked() + options_.safety_interval_ms
                       : next->IsNull(0, 0)   ? Clock::kNever
                                              : next->Int(0, 0));
}

void PostgresQueue::HandleNotification(std::string_view payload) {
  if (payload.starts_with("outcome ") && std::count(payload.begin(), payload.end(), ' ') == 3) {
    // "outcome <state> <id> <queue>" (delayq._outcome): a job someone waits for ended.
    const std::string_view rest = payload.substr(8);
    const size_t a = rest.find(' '), b = rest.find(' ', a + 1);
    if (auto state = ParseJobState(rest.substr(0, a)))
      outcomes_.Notify(rest.substr(b + 1), rest.substr(a + 1, b - a - 1), *state);
    return;
  }
  const size_t space = payload.rfind(' ');
  if (space == std::string_view::npos) return;
  const std::string_view queue = payload.substr(0, space), due_text = payload.substr(space + 1);
  int64_t due = 0;
  if (std::from_chars(due_text.data(), due_text.data() + due_text.size(), due).ec != std::errc()) return;
  std::lock_guard lock(mu_);
  if (!waiting_.contains(queue)) return;
  if (due <= DbNowLocked()) {
    to_serve_.emplace(queue);
  } else {
    auto [at, fresh] = wake_at_.emplace(std::string(queue), due);
    if (!fresh && due >= at->second) return;
    at->second = due;
  }
  poked_ = true;
  cv_.notify_all();
}

// `first`: the connection Start opened for it, before the pool took the rest (or null).
void PostgresQueue::ListenerLoop(std::unique_ptr<Connection> first) {
  int64_t backoff_ms = 100;
  for (;;) {
    uint64_t n = 0;  // numbered before the connect, which may take connect_timeout_s (NoteHealth)
    {
      std::unique_lock lock(mu_);
      if (stopping_) return;
      n = ++statements_;
    }
    auto c = first ? Result<std::unique_ptr<Connection>>(std::move(first))
                   : Connection::Open(options_.url, options_.connect_timeout_s);
    // A connection that listened, then broke, is opened again at once; one that could not LISTEN
    // (a standby, a role without the right) is tried again after the back-off, not in a loop.
    Status s = c.ok() ? Listen(**c) : c.status();
    if (s.ok()) {
      backoff_ms = 100;
      continue;
    }
    NoteHealth(n, s);
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [&] { return stopping_; });
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 2000);
  }
}

Status PostgresQueue::Listen(Connection& c) {
  // Close shuts down a duplicate of the socket that this function owns: libpq closes its own
  // descriptor when the connection breaks, and its number may be another socket's by then.
  const int own = ::dup(c.socket());
  if (own < 0) return Status::Unavailable(fmt::format("cannot listen: dup: {}", std::strerror(errno)));
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(own);
      return Status::Ok();  // closing: the loop sees it
    }
    listening_socket_ = own;  // from now on Close ends the wait below
  }
  struct Unregister {
    PostgresQueue* q;
    int own;
    ~Unregister() {
      {
        std::lock_guard lock(q->mu_);
        q->listening_socket_ = -1;
      }
      ::close(own);
    }
  } unregister{this, own};
  if (Status s = c.Run("LISTEN delayq"); !s.ok()) {
    std::lock_guard lock(mu_);
    return stopping_ ? Status::Ok() : s;
  }
  {
    // Whatever was announced while no one listened: every waiting queue looks once.
    std::lock_guard lock(mu_);
    for (const auto& [queue, line] : waiting_) to_serve_.insert(queue);
    poked_ = true;
    cv_.notify_all();
  }
  outcomes_.Recheck();  // and every wait for an outcome reads its job again
  pollfd fd{c.socket(), POLLIN, 0};
  for (;;) {
    // First what libpq has read already (a notification may have come in with LISTEN's answer):
    // the socket would not show it.
    while (PGnotify* n = PQnotifies(c.raw())) {
      HandleNotification(n->extra);
      PQfreemem(n);
    }
    // A notification, a broken connection, or Close. The timeout is a backstop only: bytes that
    // TLS has taken off the socket and libpq has not read would not wake poll.
    const int ready = ::poll(&fd, 1, 1000);
    {
      std::lock_guard lock(mu_);
      if (stopping_) return Status::Ok();  // closing: the loop sees it
    }
    if (ready < 0 && errno != EINTR) return Status::Ok();   // as a broken connection: a new one
    if (PQconsumeInput(c.raw()) == 0) return Status::Ok();  // the connection broke: a new one
  }
}

}  // namespace delayq::postgres
