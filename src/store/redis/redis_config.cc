// The queue cache: each queue's shards, config and key routing as Redis holds them (in the home
// config hash dq:{q}:config), read on first use and again after kConfigFreshMs, since other
// servers may change them; and the registry dq:queues, which bounds how many queues there are.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "core/errors.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {

// Keys choose their shard so that one key always lands on one shard, whichever server enqueues:
// CRC16 (Redis Cluster's checksum, the same on every platform and build) of the whole key. Before,
// std::hash chose, which the standard leaves to each standard library: two servers built
// differently would send one key to two shards and enqueue its job twice. A sharded queue made
// then has no key_route and keeps std::hash (moving its keys would strand the jobs they name);
// docs/operations.md says how to move such a queue.
int RedisQueue::QueueView::ShardOfKey(std::string_view key) const {
  if (shards == 1) return 0;
  if (legacy_key_route)
    return static_cast<int>(std::hash<std::string>()(std::string(key)) % static_cast<size_t>(shards));
  return Crc16(key) % shards;
}

Result<RedisQueue::QueueView> RedisQueue::Info(std::string_view queue_view, bool create) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  {
    std::lock_guard lock(mu_);
    if (closed_) return errors::StoreClosed();
    auto it = queues_.find(queue);
    if (it != queues_.end() && it->second.config_read_at != Clock::kNever &&
        SteadyMs() - it->second.config_read_at < kConfigFreshMs) {
      return it->second.view;
    }
  }
  if (create) {
    // Registered first: a queue over --max-queues is taken out again before it holds anything
    // (servers racing at the limit may pass it by one each).
    // Not waited for: the limit below must judge this answer (a retry after an unconfirmed SADD
    // would skip it), and a registration a failover lost is made again by the queue's next
    // Info(create). The queue's config (create_queue) is what is confirmed.
    auto reg = Call(kRegistry, {"SADD", kRegistry, queue});
    if (!reg.ok()) return reg.status();
    if (reg->AsInt() == 1) {
      auto count = Call(kRegistry, {"SCARD", kRegistry});
      if (!count.ok()) return count.status();
      if (count->AsInt() > static_cast<int64_t>(options_.max_queues)) {
        (void)Call(kRegistry, {"SREM", kRegistry, queue});
        return errors::QueueLimit(queue, static_cast<size_t>(count->AsInt()), options_.max_queues);
      }
    }
    const std::string home = HomeConfigKey(queue);
    auto r = Eval(kCreateQueueScript, {home}, {std::to_string(options_.shards)}, true);
    if (!r.ok()) return r.status();
    if (r->is_error()) return ScriptError(*r);
  }
  // A SetConfig on another thread between our HGETALL and our store would be undone by what we
  // read (the scheduler reads configs too): read again when a write happened meanwhile.
  for (int attempt = 0;; ++attempt) {
    uint64_t writes_before;
    {
      std::lock_guard lock(mu_);
      writes_before = config_writes_;
    }
    auto view = ReadConfig(queue, create, attempt < 3 ? std::optional(writes_before) : std::nullopt);
    if (!view.ok()) return view.status();
    if (*view) return std::move(**view);
  }
}

// Reads the queue's config hash and caches it. With `writes_before`, a config write since then
// makes it cache nothing and answer nullopt (the caller reads again). Takes mu_ itself.
Result<std::optional<RedisQueue::QueueView>> RedisQueue::ReadConfig(const std::string& queue, bool create,
                                                                    std::optional<uint64_t> writes_before) {
  const std::string home = HomeConfigKey(queue);
  auto all = Call(home, {"HGETALL", home});
  if (!all.ok()) return all.status();
  if (all->is_error()) return ScriptError(*all);
  if (all->array.empty() && !create) return errors::UnknownQueue(queue);
  QueueView view;
  view.name = queue;
  QueueConfig& c = view.config;
  c = options_.default_queue_config;
  bool crc16 = false;
  for (size_t i = 0; i + 1 < all->array.size(); i += 2) {
    const std::string& k = all->array[i].str;
    const std::string& v = all->array[i + 1].str;
    if (k == "shards") view.shards = std::clamp(std::atoi(v.c_str()), 1, 256);
    else if (k == "key_route") crc16 = v == "crc16";
    else if (k == "max_attempts") c.max_attempts = std::atoi(v.c_str());
    else if (k == "base_ms") c.backoff.base_ms = std::atoll(v.c_str());
    else if (k == "factor") c.backoff.factor = std::atof(v.c_str());
    else if (k == "max_ms") c.backoff.max_ms = std::atoll(v.c_str());
    else if (k == "jitter") c.backoff.jitter = std::atof(v.c_str());
    else if (k == "lease_ms") c.lease_ms = std::atoll(v.c_str());
    else if (k == "max_payload") c.max_payload = std::atoll(v.c_str());
    else if (k == "dead_retention_ms") c.dead_retention_ms = std::atoll(v.c_str());
    else if (k == "max_delay_ms") c.max_delay_ms = std::atoll(v.c_str());
    else if (k == "rate_per_s") c.rate_per_s = std::atof(v.c_str());
    else if (k == "burst") c.burst = std::atoll(v.c_str());
    else if (k == "max_reserved") c.max_reserved = std::atoll(v.c_str());
    else if (k == "group_max_reserved") c.group_max_reserved = std::atoll(v.c_str());
    else if (k == "priority_aging_ms") c.priority_aging_ms = std::atoll(v.c_str());
    else if (k == "keep_completed_ms") c.keep_completed_ms = std::atoll(v.c_str());
  }
  view.legacy_key_route = view.shards > 1 && !crc16;
  if (options_.after_config_read_for_test) options_.after_config_read_for_test(queue);
  std::lock_guard lock(mu_);
  if (writes_before && config_writes_ != *writes_before) return std::optional<QueueView>();
  QueueInfo& info = queues_[queue];
  if (info.view.name.empty()) {
    info.check = true;
    cv_.notify_all();
  }
  info.view = view;
  info.config_read_at = SteadyMs();
  const auto shards = static_cast<size_t>(view.shards);
  info.next_due.resize(shards);
  info.next_lease.resize(shards);
  info.next_dead.resize(shards);
  info.next_done.resize(shards);
  return std::optional(std::move(view));
}

Status RedisQueue::WriteConfig(const std::string& queue, const QueueConfig& c) {
  const std::string home = HomeConfigKey(queue);
  auto r = Write(home, {"HSET",
                        home,
                        "max_attempts",
                        std::to_string(c.max_attempts),
                        "base_ms",
                        std::to_string(c.backoff.base_ms),
                        "factor",
                        fmt::format("{}", c.backoff.factor),
                        "max_ms",
                        std::to_string(c.backoff.max_ms),
                        "jitter",
                        fmt::format("{}", c.backoff.jitter),
                        "lease_ms",
                        std::to_string(c.lease_ms),
                        "max_payload",
                        std::to_string(c.max_payload),
                        "dead_retention_ms",
                        std::to_string(c.dead_retention_ms),
                        "max_delay_ms",
                        std::to_string(c.max_delay_ms),
                        "rate_per_s",
                        fmt::format("{}", c.rate_per_s),
                        "burst",
                        std::to_string(c.burst),
                        "max_reserved",
                        std::to_string(c.max_reserved),
                        "group_max_reserved",
                        std::to_string(c.group_max_reserved),
                        "priority_aging_ms",
                        std::to_string(c.priority_aging_ms),
                        "keep_completed_ms",
                        std::to_string(c.keep_completed_ms)});
  if (!r.ok()) return r.status();
  if (r->is_error()) return ScriptError(*r);
  std::lock_guard lock(mu_);
  ++config_writes_;
  auto it = queues_.find(queue);
  if (it != queues_.end()) {
    it->second.view.config = c;
    it->second.config_read_at = SteadyMs();
  }
  return Status::Ok();
}

Result<QueueConfig> RedisQueue::GetConfig(std::string_view queue) {
  auto info = Info(queue, false);
  if (info.code() == Code::kNotFound) return options_.default_queue_config;
  if (!info.ok()) return info.status();
  return info->config;
}

Status RedisQueue::SetConfig(std::string_view queue, const QueueConfig& config) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateConfig(config));
  auto info = Info(queue, true);
  if (!info.ok()) return info.status();
  DELAYQ_RETURN_IF_ERROR(WriteConfig(info->name, config));
  // Limits raised may now allow what waiting reserves were held back from, on every server: they
  // try again now, not at their next token or lease end.
  const std::string wake = "dq:{" + info->name + "}:wake";
  (void)Call(wake, {"PUBLISH", wake, "ready"});  // a lost message is made up by the safety probe
  NoteReady(info->name);
  return Status::Ok();
}

Status RedisQueue::Pause(std::string_view queue) { return SetPaused(queue, true); }

Status RedisQueue::Resume(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(SetPaused(queue, false));
  NoteReady(std::string(queue));
  return Status::Ok();
}

Status RedisQueue::SetPaused(std::string_view queue, bool paused) {
  auto info = Info(queue, true);
  if (!info.ok()) return info.status();
  for (int shard = 0; shard < info->shards; ++shard) {
    const std::string key = ShardKeys(info->name, shard, info->shards)[kConfigKey];
    auto v = Write(key, {"HSET", key, "paused", paused ? "1" : "0"});
    if (!v.ok()) return v.status();
  }
  return Status::Ok();
}

}  // namespace delayq::redis
