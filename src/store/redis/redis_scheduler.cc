// The Redis store's scheduler and wake channel (redis_queue.h describes both): the scheduler
// thread runs promote, reap and dead_expire when a shard's next due time, lease deadline or
// retention comes, serves waiting reserves and times them out; the subscriber thread turns wake
// messages into earlier deadlines and ready notices. The twin of engine_scheduler.cc.
#include <spdlog/spdlog.h>

#include "core/errors.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {
namespace {

// One script to run on one shard this turn.
struct ShardTask {
  std::string queue;
  int shard = 0;
  int shards = 1;
  int64_t retention_ms = 0;  // dead_expire
  int64_t keep_completed_ms = 0;
};

}  // namespace

void RedisQueue::Poke() {
  poked_ = true;
  cv_.notify_all();
}

void RedisQueue::NoteLease(const std::string& queue, int shard, int64_t deadline) {
  std::lock_guard lock(mu_);
  auto q = queues_.find(queue);
  if (q == queues_.end() || static_cast<size_t>(shard) >= q->second.next_lease.size()) return;
  if (q->second.next_lease[static_cast<size_t>(shard)].Note(deadline)) Poke();
}

void RedisQueue::NoteDeath(const std::string& queue, int shard, int64_t dead_at) {
  std::lock_guard lock(mu_);
  auto q = queues_.find(queue);
  if (q == queues_.end() || static_cast<size_t>(shard) >= q->second.next_dead.size()) return;
  if (q->second.next_dead[static_cast<size_t>(shard)].Note(dead_at)) Poke();
}

void RedisQueue::NoteCompleted(const std::string& queue, int shard, int64_t completed_at) {
  std::lock_guard lock(mu_);
  auto q = queues_.find(queue);
  if (q == queues_.end() || static_cast<size_t>(shard) >= q->second.next_done.size()) return;
  if (q->second.next_done[static_cast<size_t>(shard)].Note(completed_at)) Poke();
}

void RedisQueue::NoteReady(const std::string& queue) {
  std::lock_guard lock(mu_);
  ready_notices_.insert(queue);
  Poke();
}

void RedisQueue::NoteFlowLimited(const std::string& queue, int /*shard*/, int64_t next_token_us) {
  if (next_token_us <= 0) return;
  const int64_t at = (next_token_us + 999) / 1000;
  std::lock_guard lock(mu_);
  auto q = queues_.find(queue);
  if (q == queues_.end()) return;
  if (at < q->second.flow_wake) {
    q->second.flow_wake = at;
    Poke();
  }
}

void RedisQueue::DropIfUnusedLocked(const std::string& queue) {
  auto q = queues_.find(queue);
  if (q == queues_.end() || q->second.config_read_at != Clock::kNever) return;
  for (uint64_t handle : q->second.waiters) {
    if (waiters_.contains(handle)) return;
  }
  queues_.erase(q);
}

void RedisQueue::ServeWaiters(const std::string& queue) {
  while (true) {
    uint64_t handle = 0;
    Waiter w;
    {
      std::lock_guard lock(mu_);
      auto q = queues_.find(queue);
      if (closed_ || q == queues_.end()) return;
      while (!q->second.waiters.empty() && !waiters_.contains(q->second.waiters.front())) q->second.waiters.pop_front();
      if (q->second.waiters.empty()) return;
      handle = q->second.waiters.front();
      q->second.waiters.pop_front();
      auto it = waiters_.find(handle);
      w = std::move(it->second);
      waiters_.erase(it);
      serving_.insert(handle);  // a CancelReserve meanwhile is noted, not lost
    }
    ReserveRequest now = w.request;
    now.wait_ms = 0;
    auto jobs = ReserveNow(queue, now);
    {
      std::lock_guard lock(mu_);
      serving_.erase(handle);
      const bool cancelled = cancelled_while_serving_.erase(handle) > 0;
      if (jobs.ok() && jobs->empty() && !cancelled && !closed_) {  // nothing for it after all: back at the front
        waiters_.emplace(handle, std::move(w));
        queues_[queue].waiters.push_front(handle);
        return;
      }
    }
    w.done(std::move(jobs));
  }
}

// What one tick found due under mu_, run without it.
struct RedisQueue::SchedulerTurn {
  std::vector<ShardTask> promote, reap, expire;
  std::vector<std::string> unloaded;     // learned from the wake channel: read their config first
  std::vector<ReserveCallback> expired;  // waiting reserves whose wait ran out
  std::set<std::string> notices;         // queues whose waiters try again
  bool probe = false;                    // a safety probe: PING, every queue looked at
  bool refresh_registry = false;
};

void RedisQueue::SchedulerLoop() {
  SchedulerTimers timers;
  std::unique_lock lock(mu_);
  while (!closed_) {
    const int64_t wake = SchedulerTick(lock, timers);
    if (closed_ || poked_ || !ready_notices_.empty()) continue;
    const int64_t now_steady = SteadyMs();
    if (wake > now_steady) {
      cv_.wait_for(lock, std::chrono::milliseconds(wake - now_steady), [this] { return closed_ || poked_; });
    }
  }
}

int64_t RedisQueue::SchedulerTick(std::unique_lock<std::mutex>& lock, SchedulerTimers& timers) {
  SchedulerTurn turn = CollectTurnLocked(SteadyMs(), timers);
  poked_ = false;
  lock.unlock();
  RunTurn(turn);
  lock.lock();
  return NextTickLocked(timers);
}

RedisQueue::SchedulerTurn RedisQueue::CollectTurnLocked(int64_t steady, SchedulerTimers& timers) {
  SchedulerTurn turn;
  const int64_t redis_now = steady + clock_offset_ms_;
  if (steady >= timers.next_safety) {
    // Every queue is looked at, and every waiting reserve tries again: a wake message can be
    // lost, and a job promoted by another process is announced only by one.
    for (auto& [name, q] : queues_) q.check = true;
    timers.next_safety = steady + options_.safety_interval_ms;
    turn.probe = true;
  }
  // What is due now: promotions, expired leases, retention sweeps, flow-control wakes.
  for (auto& [name, q] : queues_) {
    if (!q.Loaded()) {
      // Not (yet) a queue here: its config is read, not promoted or reaped. Its check is
      // answered by that read, so that a name waiters wait on does not keep the loop from
      // sleeping (it spun a core until the queue existed).
      if (q.absent_until <= steady) turn.unloaded.push_back(name);
      q.check = false;
      continue;
    }
    const int64_t retention = q.view.config.dead_retention_ms, keep = CompletedSweepAfterMs(q.view.config);
    for (int s = 0; s < q.view.shards; ++s) {
      const auto i = static_cast<size_t>(s);
      const ShardTask task{name, s, q.view.shards, retention, keep};
      const bool promoting = q.check || q.next_due[i].By(redis_now);
      const bool reaping = q.check || q.next_lease[i].By(redis_now);
      const bool expiring = q.next_dead[i].By(redis_now - retention) || q.next_done[i].By(redis_now - keep);
      if (promoting) turn.promote.push_back(task);
      if (reaping) turn.reap.push_back(task);
      if (expiring) turn.expire.push_back(task);
      // What each script's answer sets: the notes from now on are merged into it.
      if (promoting) q.next_due[i].Launched();
      if (promoting || reaping) q.next_lease[i].Launched();
      if (promoting || reaping || expiring) q.next_dead[i].Launched();
      if (expiring) q.next_done[i].Launched();
    }
    q.check = false;
    if (q.flow_wake <= redis_now) {
      q.flow_wake = Clock::kNever;
      if (!q.waiters.empty()) ready_notices_.insert(name);
    }
  }
  ExpireWaitersLocked(steady, turn);
  turn.refresh_registry = steady >= timers.next_registry;
  if (turn.refresh_registry) timers.next_registry = steady + kRegistryRefreshMs;
  turn.notices.swap(ready_notices_);
  // A lost wake message (the channel was down, or not yet subscribed) must not strand a waiter
  // on a job that is already ready: each safety interval, every queue with waiters is tried.
  if (turn.probe) {
    for (auto& [name, q] : queues_) {
      if (!q.waiters.empty()) turn.notices.insert(name);
    }
  }
  return turn;
}

// Waiting reserves whose wait ran out: answered (empty) by the turn, without mu_.
void RedisQueue::ExpireWaitersLocked(int64_t steady, SchedulerTurn& turn) {
  std::set<std::string> left;  // queues some waiter left
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline <= steady) {
      turn.expired.push_back(std::move(it->second.done));
      left.insert(it->second.queue);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& name : left) DropIfUnusedLocked(name);
}

void RedisQueue::RunTurn(SchedulerTurn& turn) {
  for (auto& done : turn.expired) done(std::vector<Delivery>{});
  if (turn.probe) (void)Call("", {"PING"});  // keeps Health() current even with no queue to look at
  ReadUnloaded(turn.unloaded);
  if (turn.refresh_registry) RefreshRegistry();
  // Promotes and the reserves they let through go before this process's enqueues.
  std::optional<DeliveryFirst::Delivery> delivering;
  if (!turn.promote.empty() || !turn.notices.empty()) delivering.emplace(delivery_first_);
  RunPromotes(turn);
  RunReaps(turn);
  RunDeadExpiry(turn);
  for (const auto& name : turn.notices) ServeWaiters(name);
}

void RedisQueue::ReadUnloaded(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    auto info = Info(name, false);
    std::lock_guard g(mu_);
    auto q = queues_.find(name);
    if (q == queues_.end()) continue;
    if (info.ok()) {
      q->second.check = true;
      poked_ = true;
    } else {  // not a queue (or Redis could not say): read again at the next safety probe or wake message
      q->second.absent_until = SteadyMs() + options_.safety_interval_ms;
    }
  }
}

void RedisQueue::RefreshRegistry() {
  Status secret = LoadReceiptSecret();
  if (!secret.ok()) spdlog::warn("reading the receipt secret from Redis: {}", secret.message());
  auto names = Call(kRegistry, {"SMEMBERS", kRegistry});
  if (!names.ok()) return;
  for (const auto& n : names->array) {
    if (ValidateQueueName(n.str).ok()) (void)Info(n.str, false);
  }
}

void RedisQueue::RunPromotes(SchedulerTurn& turn) {
  for (const auto& [name, shard, shards, retention, keep] : turn.promote) {
    auto v = Run(kPromoteScript, name, shard, shards, {std::to_string(kChunk)});
    if (options_.after_promote_for_test) options_.after_promote_for_test(name);
    if (!v.ok() || v->is_error() || v->array.size() < 4) {
      if (!v.ok()) spdlog::warn("promoting queue {}: {}", name, v.status().message());
      continue;
    }
    std::lock_guard g(mu_);
    auto& q = queues_[name];
    const auto i = static_cast<size_t>(shard);
    if (q.next_due.size() <= i) continue;
    clock_offset_ms_ = v->array[3].AsInt() - SteadyMs();
    q.next_due[i].Answered(v->array[1].AsInt());
    q.next_lease[i].Answered(v->array[2].AsInt());
    if (v->array.size() > 4) q.next_dead[i].Answered(v->array[4].AsInt());
    if (v->array[0].AsInt() > 0) turn.notices.insert(name);
    if (v->array[0].AsInt() >= static_cast<int64_t>(kChunk)) q.check = true;  // more to move
  }
}

void RedisQueue::RunReaps(SchedulerTurn& turn) {
  for (const auto& [name, shard, shards, retention, keep] : turn.reap) {
    auto v = Run(kReapScript, name, shard, shards, {std::to_string(kClaimIdleMs), std::to_string(kChunk)});
    if (!v.ok() || v->is_error() || v->array.size() < 3) continue;
    // Exactly one server's reap sends a job dead, so each death is logged once, as on the
    // embedded store.
    if (v->array.size() > 4) {
      for (const auto& d : v->array[4].array) {
        if (d.array.size() < 3) continue;
        spdlog::warn("{}", errors::DeadJobWarning(name, d.array[0].str, static_cast<int32_t>(d.array[1].AsInt()),
                                                  d.array[2].str));
      }
    }
    std::lock_guard g(mu_);
    auto& q = queues_[name];
    const auto i = static_cast<size_t>(shard);
    if (q.next_lease.size() <= i) continue;
    q.next_lease[i].Answered(v->array[1].AsInt());
    if (v->array.size() > 3) q.next_dead[i].Answered(v->array[3].AsInt());
    if (v->array.size() > 5 && v->array[5].AsInt() >= 0) q.next_done[i].Note(v->array[5].AsInt());
    if (v->array[0].AsInt() > 0) turn.notices.insert(name);
  }
}

// Dead jobs past their retention, planned like the embedded store's sweep: at the moment the
// oldest dead job of a shard runs out, at most kChunk per shard per turn.
void RedisQueue::RunDeadExpiry(SchedulerTurn& turn) {
  for (const auto& [name, shard, shards, retention, keep] : turn.expire) {
    auto v = Run(kDeadExpireScript, name, shard, shards,
                 {std::to_string(retention), std::to_string(kChunk), std::to_string(keep)});
    if (!v.ok() || v->is_error() || v->array.size() < 3) {
      if (!v.ok()) spdlog::warn("deleting dead jobs past retention in queue {}: {}", name, v.status().message());
      continue;
    }
    std::lock_guard g(mu_);
    auto& q = queues_[name];
    if (q.next_dead.size() <= static_cast<size_t>(shard)) continue;
    q.next_dead[static_cast<size_t>(shard)].Answered(v->array[1].AsInt());
    if (v->array.size() > 3) q.next_done[static_cast<size_t>(shard)].Answered(v->array[3].AsInt());
  }
}

// The steady ms of the earliest deadline known: the safety probe, a queue to read, a shard's due
// time, lease deadline or retention, a flow-control token for waiters, a waiter's timeout.
int64_t RedisQueue::NextTickLocked(const SchedulerTimers& timers) {
  int64_t wake = timers.next_safety;
  const int64_t offset = clock_offset_ms_;
  const int64_t now_steady = SteadyMs();
  auto to_steady = [&](int64_t redis_ms) { return redis_ms - offset; };
  for (auto& [name, q] : queues_) {
    if (!q.Loaded()) {  // read when it may exist, as above
      if (q.check || q.absent_until <= now_steady) wake = std::min(wake, std::max(now_steady, q.absent_until));
      continue;
    }
    if (q.check) wake = now_steady;
    if (q.flow_wake != Clock::kNever && !q.waiters.empty()) wake = std::min(wake, to_steady(q.flow_wake));
    for (size_t s = 0; s < q.next_due.size(); ++s) {
      if (q.next_due[s].at != Clock::kNever) wake = std::min(wake, to_steady(q.next_due[s].at));
      if (q.next_lease[s].at != Clock::kNever) wake = std::min(wake, to_steady(q.next_lease[s].at));
      if (q.next_dead[s].at != Clock::kNever) {
        wake = std::min(wake, to_steady(q.next_dead[s].at + q.view.config.dead_retention_ms));
      }
      if (q.next_done[s].at != Clock::kNever) {
        wake = std::min(wake, to_steady(q.next_done[s].at + CompletedSweepAfterMs(q.view.config)));
      }
    }
  }
  for (auto& [h, w] : waiters_) wake = std::min(wake, w.deadline);
  return wake;
}

// A message of the wake channel: ["pmessage", pattern, "dq:{tag}:wake", payload], the payload
// "due <ms>" (a shard's earliest due time moved earlier), "ready" (jobs became ready), "outcome
// <state> <id>" (a job someone waits for ended) or else (look at the queue).
void RedisQueue::HandleWakeMessage(const Value& v) {
  if (v.type != Value::kArray || v.array.size() < 4 || v.array[0].str != "pmessage") return;
  const std::string& channel = v.array[2].str;
  const std::string& payload = v.array[3].str;
  auto open = channel.find('{'), close = channel.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close <= open) return;
  std::string tag = channel.substr(open + 1, close - open - 1);
  int shard = 0;
  if (auto hash = tag.rfind('#'); hash != std::string::npos) {
    shard = std::atoi(tag.c_str() + hash + 1);
    tag = tag.substr(0, hash);
  }
  if (payload.starts_with("outcome ")) {  // "outcome <state> <id>" (prelude.lua's announce_outcome)
    const std::string_view rest = std::string_view(payload).substr(8);
    const size_t space = rest.find(' ');
    auto state = ParseJobState(rest.substr(0, space));
    if (space != std::string_view::npos && state) outcomes_.Notify(tag, rest.substr(space + 1), *state);
    return;
  }
  std::lock_guard lock(mu_);
  auto& q = queues_[tag];
  if (q.view.name.empty()) {  // a queue this process has not seen: learn it at the next tick
    q.view.name = tag;
    q.check = true;
  }
  q.absent_until = 0;  // it exists now, if it did not
  if (payload.rfind("due ", 0) == 0 && static_cast<size_t>(shard) < q.next_due.size()) {
    (void)q.next_due[static_cast<size_t>(shard)].Note(std::atoll(payload.c_str() + 4));
  } else if (payload == "ready") {
    ready_notices_.insert(tag);
  } else {
    q.check = true;
  }
  Poke();
}

void RedisQueue::SubscriberLoop() {
  int backoff_ms = 100;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
    }
    std::string error;
    if (auto conn = client_->Dedicated(&error)) {
      const bool again = Subscribe(*conn);
      std::lock_guard lock(mu_);
      subscription_ = nullptr;  // before `conn` goes
      if (!again) return;       // closed
      backoff_ms = 100;
    } else {
      spdlog::warn("the Redis wake channel: {}; retrying in {} ms", error, backoff_ms);
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [this] { return closed_; });
    backoff_ms = std::min(backoff_ms * 2, 2000);
  }
}

// Reads wake messages on `conn` until it drops (true: connect again) or the store closes (false).
bool RedisQueue::Subscribe(RedisClient::RawConnection& conn) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    subscription_ = &conn;  // from now on Close interrupts the read
  }
  if (Status sent = conn.Send({"PSUBSCRIBE", "dq:*:wake"}); !sent.ok()) {
    spdlog::warn("the Redis wake channel: {}; connecting again", sent.message());
    return true;
  }
  while (true) {
    // Nothing to do between messages: Close interrupts the read, so the timeout only bounds it.
    auto v = conn.Read(10'000);
    {
      std::lock_guard lock(mu_);
      if (closed_) return false;
    }
    if (!v.ok()) {
      spdlog::warn("the Redis wake channel dropped ({}); reconnecting", v.status().message());
      return true;
    }
    if (IsSubscribed(*v)) {
      CatchUp();
    } else {
      HandleWakeMessage(*v);
    }
  }
}

bool RedisQueue::IsSubscribed(const Value& v) {
  return v.type == Value::kArray && !v.array.empty() && v.array[0].str == "psubscribe";
}

// What the channel may have missed while it was not subscribed: read again. Only once Redis has
// confirmed the subscription: a message published after the PSUBSCRIBE was sent but before Redis
// took it is lost, and a read made meanwhile may be older than it (a wait for an outcome then
// waited until its end; a CI run caught it).
void RedisQueue::CatchUp() {
  outcomes_.Recheck();
  std::lock_guard lock(mu_);
  for (auto& [name, q] : queues_) {
    q.check = true;
    if (!q.waiters.empty()) ready_notices_.insert(name);  // a job may have come meanwhile
  }
  Poke();
}

}  // namespace delayq::redis
