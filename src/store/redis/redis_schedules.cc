// Schedules on the Redis store: the rows ScheduleStore asks for, in the queue's hash
// dq:{q}:schedules (name -> record, "#name" -> generation; a name never holds '#'), with the
// compare-and-set in a script so that servers sharing the Redis never move one back; the set
// dq:scheduled lists the queues that have any. The rules are the runner's (schedule/runner.h),
// the same as on the embedded store (engine_schedules.cc).
#include <fmt/format.h>

#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {
namespace {

Status Changed(std::string_view queue, std::string_view name) {
  return Status::Conflict(
      fmt::format("schedule {} of queue {} changed meanwhile; read it again", name.substr(0, 200), queue));
}

// The schedules in a HGETALL answer of one queue's hash.
Result<std::vector<StoredSchedule>> FromHash(const std::string& queue, const Value& all) {
  std::map<std::string, uint64_t> generations;
  for (size_t i = 0; i + 1 < all.array.size(); i += 2) {
    if (!all.array[i].str.empty() && all.array[i].str[0] == '#') {
      generations[all.array[i].str.substr(1)] = static_cast<uint64_t>(all.array[i + 1].AsInt());
    }
  }
  std::vector<StoredSchedule> out;
  for (size_t i = 0; i + 1 < all.array.size(); i += 2) {
    const std::string& name = all.array[i].str;
    if (name.empty() || name[0] == '#') continue;
    StoredSchedule s;
    DELAYQ_RETURN_IF_ERROR(DecodeSchedule(all.array[i + 1].str, &s));
    s.queue = queue;
    s.state.generation = generations.contains(name) ? generations[name] : 1;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const StoredSchedule& a, const StoredSchedule& b) { return a.spec.name < b.spec.name; });
  return out;
}

}  // namespace

Result<std::optional<StoredSchedule>> RedisQueue::LoadSchedule(std::string_view queue_view, std::string_view name) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view), key = SchedulesKey(queue);
  auto v = Call(key, {"HMGET", key, std::string(name), "#" + std::string(name)});
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->array.size() < 2 || v->array[0].is_nil()) return std::optional<StoredSchedule>{};
  StoredSchedule s;
  DELAYQ_RETURN_IF_ERROR(DecodeSchedule(v->array[0].str, &s));
  s.queue = queue;
  s.state.generation = static_cast<uint64_t>(v->array[1].AsInt());
  return std::optional(std::move(s));
}

Result<std::vector<StoredSchedule>> RedisQueue::LoadSchedules(std::string_view queue_view) {
  std::vector<std::string> queues;
  if (queue_view.empty()) {
    auto names = Call(kScheduledRegistry, {"SMEMBERS", kScheduledRegistry});
    if (!names.ok()) return names.status();
    for (const auto& n : names->array) {
      if (ValidateQueueName(n.str).ok()) queues.push_back(n.str);
    }
  } else {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
    queues.emplace_back(queue_view);
  }
  std::vector<StoredSchedule> out;
  for (const auto& queue : queues) {
    const std::string key = SchedulesKey(queue);
    auto all = Call(key, {"HGETALL", key});
    if (!all.ok()) return all.status();
    if (all->is_error()) return ScriptError(*all);
    auto some = FromHash(queue, *all);
    if (!some.ok()) return some.status();
    for (auto& s : *some) out.push_back(std::move(s));
  }
  return out;
}

Status RedisQueue::StoreSchedule(const StoredSchedule& s, uint64_t expected) {
  if (expected == 0) {  // a new schedule: its queue exists (within the queue limit), and is listed
    auto info = Info(s.queue, true);
    if (!info.ok()) return info.status();
    auto listed = Call(kScheduledRegistry, {"SADD", kScheduledRegistry, s.queue});
    if (!listed.ok()) return listed.status();
  }
  auto v = Eval(kStoreScheduleScript, {SchedulesKey(s.queue)},
                {s.spec.name, std::to_string(expected), EncodeSchedule(s), std::to_string(ScheduleLimits::kMaxPerQueue),
                 std::to_string(FirstGeneration())});
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->str == "CONFLICT") return Changed(s.queue, s.spec.name);
  if (v->str == "LIMIT") {
    return Status::ResourceExhausted(
        fmt::format("queue {} has {} schedules, the most a queue may have; delete one first", s.queue,
                    ScheduleLimits::kMaxPerQueue));
  }
  return Status::Ok();
}

Status RedisQueue::EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  auto v =
      Eval(kEraseScheduleScript, {SchedulesKey(std::string(queue))}, {std::string(name), std::to_string(expected)});
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->str == "NOTFOUND") return Status::NotFound("no such schedule");
  if (v->str == "CONFLICT") return Changed(queue, name);
  return Status::Ok();
}

}  // namespace delayq::redis
