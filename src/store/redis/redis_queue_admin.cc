// Queues on the Redis store: stats (summed over shards), the list, the schedule histogram,
// delete. The twin of the embedded store's engine_queues.cc (config and pause: redis_config.cc).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/errors.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {
namespace {

// Lateness from the buckets the scripts keep (edges in LatenessSummary::kLatenessBucketsMs).
// `prefix`: "" for the lateness, "w" for the time flow control held deliveries back (the
// scripts' lateness_flush).
void AddLateness(const Value& flat, std::string_view prefix, std::vector<uint64_t>* buckets, uint64_t* count,
                 int64_t* sum_us, int64_t* max_us) {
  for (size_t i = 0; i + 1 < flat.array.size(); i += 2) {
    std::string_view k = flat.array[i].str;
    if (prefix.empty() ? k.starts_with('w') : !k.starts_with(prefix)) continue;
    k.remove_prefix(prefix.size());
    const int64_t v = flat.array[i + 1].AsInt();
    if (k == "count") *count += static_cast<uint64_t>(v);
    else if (k == "sum_us") *sum_us += v;
    else if (k == "max_us") *max_us = std::max(*max_us, v);
    else if (k.size() > 1 && k[0] == 'b') {
      size_t b = static_cast<size_t>(std::atoi(std::string(k.substr(1)).c_str()));
      if (b >= 1 && b <= buckets->size()) (*buckets)[b - 1] += static_cast<uint64_t>(v);
    }
  }
}

LatenessSummary Summarize(const std::vector<uint64_t>& per_bucket, uint64_t count, int64_t sum_us, int64_t max_us) {
  LatenessSummary s;
  constexpr size_t kEdges = std::size(LatenessSummary::kLatenessBucketsMs);
  s.count = count;
  s.sum_ms = static_cast<double>(sum_us) / 1000.0;
  s.max_ms = static_cast<double>(max_us) / 1000.0;
  uint64_t running = 0;
  for (size_t i = 0; i < kEdges; ++i) {
    running += per_bucket[i];
    s.cumulative.push_back(running);
  }
  auto percentile = [&](double q) {
    if (count == 0) return 0.0;
    const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count)));
    for (size_t i = 0; i < kEdges; ++i) {
      if (s.cumulative[i] >= rank) return std::min(LatenessSummary::kLatenessBucketsMs[i], s.max_ms);
    }
    return s.max_ms;
  };
  s.p50_ms = percentile(0.5);
  s.p90_ms = percentile(0.9);
  s.p99_ms = percentile(0.99);
  s.p999_ms = percentile(0.999);
  return s;
}

// QueueStats::groups from every shard's counts (the embedded store's twin is
// EngineImpl::GroupsLocked): the top groups by ready jobs, then groups with only leased jobs; none
// while no job has a named group.
struct GroupTally {
  std::map<std::string, QueueStats::Group> groups;
  bool named = false;
  void Shard(const Value& lanes, int64_t ready, int64_t reserved, const std::map<std::string, int64_t>& leases) {
    int64_t in_lanes = 0;
    for (size_t i = 0; i + 1 < lanes.array.size(); i += 2) {
      const std::string& g = lanes.array[i].str;
      const int64_t n = lanes.array[i + 1].AsInt();
      groups[g].ready += n;
      in_lanes += n;
      named = named || !g.empty();
    }
    int64_t named_leases = 0;
    for (const auto& [g, n] : leases) {
      groups[g].reserved += n;
      named_leases += n;
      named = true;
    }
    QueueStats::Group& fallback = groups[""];
    fallback.ready += std::max<int64_t>(0, ready - in_lanes);  // the stream's waiting entries
    fallback.reserved += std::max<int64_t>(0, reserved - named_leases);
  }
  std::vector<QueueStats::Group> Top() {
    std::vector<QueueStats::Group> out;
    if (!named) return out;
    for (auto& [g, counts] : groups) {
      counts.group = g;
      if (counts.ready > 0 || counts.reserved > 0) out.push_back(counts);
    }
    std::stable_sort(out.begin(), out.end(), [](const QueueStats::Group& a, const QueueStats::Group& b) {
      if ((a.ready > 0) != (b.ready > 0)) return a.ready > 0;
      return a.ready > b.ready;
    });
    if (out.size() > Limits::kStatsGroups) out.resize(Limits::kStatsGroups);
    return out;
  }
};

}  // namespace

Result<QueueStats> RedisQueue::Stats(std::string_view queue_view) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const QueueView& q = *info;
  QueueStats s;
  s.name = q.name;
  std::vector<uint64_t> buckets(std::size(LatenessSummary::kLatenessBucketsMs) + 1, 0);
  std::vector<uint64_t> wait_buckets = buckets;
  uint64_t count = 0, wait_count = 0;
  int64_t sum_us = 0, max_us = 0, wait_sum_us = 0, wait_max_us = 0;
  GroupTally groups;
  for (int shard = 0; shard < q.shards; ++shard) {
    auto v = Run(kStatsScript, q, shard, {});
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    const auto& a = v->array;
    if (a.size() < 12) return Status::Internal("the stats script answered oddly");
    std::map<std::string, int64_t> group_leases;
    s.scheduled += a[0].AsInt();
    s.ready += a[1].AsInt();
    s.reserved += a[2].AsInt();
    s.dead += a[3].AsInt();
    if (a.size() > 12) s.completed += a[12].AsInt();
    s.due_next_60s += a[4].AsInt();
    if (a[5].AsInt() >= 0 && (!s.earliest_due_at_ms || a[5].AsInt() < *s.earliest_due_at_ms)) {
      s.earliest_due_at_ms = a[5].AsInt();
    }
    s.oldest_ready_ms = std::max(s.oldest_ready_ms, a[6].AsInt());
    s.paused = s.paused || a[7].AsInt() == 1;
    for (size_t i = 0; i + 1 < a[8].array.size(); i += 2) {
      const std::string& k = a[8].array[i].str;
      const auto n = static_cast<uint64_t>(a[8].array[i + 1].AsInt());
      if (k == "enqueued") s.counters.enqueued += n;
      else if (k == "delivered") s.counters.delivered += n;
      else if (k == "acked") s.counters.acked += n;
      else if (k == "nacked") s.counters.nacked += n;
      else if (k == "redelivered") s.counters.redelivered += n;
      else if (k == "dead") s.counters.dead += n;
      else if (k.starts_with("gr:")) group_leases[k.substr(3)] = static_cast<int64_t>(n);
    }
    groups.Shard(a[11], a[1].AsInt(), a[2].AsInt(), group_leases);
    AddLateness(a[9], "", &buckets, &count, &sum_us, &max_us);
    AddLateness(a[9], "w", &wait_buckets, &wait_count, &wait_sum_us, &wait_max_us);
  }
  s.lateness = Summarize(buckets, count, sum_us, max_us);
  s.limit_wait = Summarize(wait_buckets, wait_count, wait_sum_us, wait_max_us);
  s.groups = groups.Top();
  return s;
}

Result<std::vector<QueueStats>> RedisQueue::ListQueues() {
  auto names = Call(kRegistry, {"SMEMBERS", kRegistry});
  if (!names.ok()) return names.status();
  std::vector<std::string> list;
  for (const auto& n : names->array) list.push_back(n.str);
  std::sort(list.begin(), list.end());
  std::vector<QueueStats> out;
  for (const auto& name : list) {
    auto s = Stats(name);
    if (s.ok()) out.push_back(std::move(*s));
  }
  return out;
}

Result<ScheduleHistogram> RedisQueue::Schedule(std::string_view queue_view, int64_t bucket_ms, int32_t buckets) {
  DELAYQ_RETURN_IF_ERROR(ValidateScheduleHistogram(bucket_ms, buckets));
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  ScheduleHistogram h;
  h.bucket_ms = bucket_ms;
  h.buckets.assign(static_cast<size_t>(buckets), 0);
  for (int shard = 0; shard < info->shards; ++shard) {
    auto v = Run(kScheduleScript, *info, shard, {std::to_string(bucket_ms), std::to_string(buckets)});
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    h.start_ms = v->array[0].AsInt();
    h.later += v->array[1].AsInt();
    for (int32_t i = 0; i < buckets && static_cast<size_t>(i + 2) < v->array.size(); ++i) {
      h.buckets[static_cast<size_t>(i)] += v->array[static_cast<size_t>(i + 2)].AsInt();
    }
  }
  return h;
}

Result<int64_t> RedisQueue::DeleteQueue(std::string_view queue_view, bool force) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const std::string& queue = info->name;
  const int shards = info->shards;
  // Without force, every shard is counted first, so the refusal names all the jobs and touches
  // nothing. Then shard by shard; a job that arrives meanwhile still stops a shard's delete (the
  // empty shards before it are gone, which loses nothing: the queue stays, with its config).
  if (!force) {
    int64_t jobs = 0;
    for (int shard = 0; shard < shards; ++shard) {
      const std::string meta = ShardKeys(queue, shard, shards)[kMetaKey];
      auto n = Call(meta, {"HLEN", meta});
      if (!n.ok()) return n.status();
      jobs += n->AsInt();
    }
    if (jobs > 0) return errors::QueueNotEmpty(queue, jobs);
  }
  int64_t deleted = 0;
  for (int shard = 0; shard < shards; ++shard) {
    auto v = Run(kDeleteQueueScript, queue, shard, shards, {force ? "1" : "0"}, true);
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    if (v->array.size() < 2) return Status::Internal("the delete_queue script answered no counts");
    if (v->array[0].AsInt() == 0) return errors::QueueNotEmpty(queue, v->array[1].AsInt());
    deleted += v->array[1].AsInt();
  }
  // Every step runs even when one is not confirmed (--redis-wait-replicas): the first such answer
  // is the delete's (it happened on the primary; a retry answers that the queue is gone), and no
  // step is left undone for a retry that cannot find the queue any more.
  const std::string home = HomeConfigKey(queue), schedules = SchedulesKey(queue);
  Status first = Write(home, {"UNLINK", home, schedules}).status();
  for (const char* registry : {kRegistry, kScheduledRegistry}) {
    Status s = Write(registry, {"SREM", registry, queue}).status();
    if (first.ok()) first = s;
  }
  ForgetDeletedQueue(queue);
  if (!first.ok()) return first;
  return deleted;
}

void RedisQueue::ForgetDeletedQueue(const std::string& queue) {
  std::lock_guard lock(mu_);
  if (auto q = queues_.find(queue); q != queues_.end()) {
    QueueInfo fresh;  // waiters wait on, as on any name that is not a queue
    fresh.view.name = queue;
    fresh.waiters = std::move(q->second.waiters);
    q->second = std::move(fresh);
    DropIfUnusedLocked(queue);
  }
  ++config_writes_;  // a config read in flight must not bring the deleted config back
}

}  // namespace delayq::redis
