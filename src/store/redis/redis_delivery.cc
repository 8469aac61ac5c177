// Deliveries on the Redis store: reserve (now or waiting), ack, nack, touch. The twin of the
// embedded store's engine_delivery.cc; waiting reserves are served by the scheduler
// (redis_scheduler.cc).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <future>

#include "core/ack_results.h"
#include "core/delivery_token.h"
#include "core/errors.h"
#include "core/flow_control.h"
#include "core/receipt.h"
#include "core/record.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::redis {

namespace {

// Flow control on a sharded queue: each shard holds an even share of the queue's rate, burst and
// max_reserved (rounded up; the reserve script keeps each shard's bucket and counts its leases).
struct ShardLimits {
  double rate = 0;
  int64_t burst = 0;
  int64_t cap = 0;
  int64_t group_cap = 0;
};

ShardLimits LimitsPerShard(const QueueConfig& c, int shards) {
  ShardLimits l;
  l.rate = c.rate_per_s / shards;
  l.burst = l.rate > 0 ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(EffectiveBurst(c) / shards))) : 0;
  l.cap = c.max_reserved > 0 ? (c.max_reserved + shards - 1) / shards : 0;
  l.group_cap = c.group_max_reserved > 0 ? (c.group_max_reserved + shards - 1) / shards : 0;
  return l;
}

// The reserve script's arguments for `want` jobs of at most max_bytes (`first`: the answer is
// still empty, so one job comes whatever its size).
std::vector<std::string> ReserveArgs(const std::string& consumer, int32_t want, int64_t lease_ms, int64_t max_bytes,
                                     bool first, const ShardLimits& l, int64_t priority_aging_ms) {
  std::vector<std::string> args = {consumer,
                                   std::to_string(want),
                                   std::to_string(lease_ms),
                                   std::to_string(kClaimIdleMs),
                                   std::to_string(max_bytes),
                                   first ? "1" : "0",
                                   fmt::format("{}", l.rate),
                                   std::to_string(l.burst),
                                   std::to_string(l.cap),
                                   std::to_string(l.group_cap),
                                   std::to_string(priority_aging_ms)};
  // Delivery tokens from the OS CSPRNG (128 bits): the scripts store them as given, and a
  // receipt acts only when its token equals the stored one.
  for (int32_t i = 0; i < want; ++i) args.push_back(DeliveryToken::Random().Hex());
  return args;
}

// One delivery of the reserve script's answer: {id, record, attempt, token, due, lease deadline,
// max_attempts, key}; its receipt signed for `queue`.
Result<Delivery> DecodeDelivery(const std::vector<Value>& a, const ReceiptSigner& signer, const std::string& queue) {
  JobRecord record;
  if (!a[1].str.empty()) DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(a[1].str, &record));
  auto receipt = Receipt::Parse(a[0].str + "." + a[3].str);
  if (!receipt.ok()) {
    return Status::Internal("the reserve script answered a malformed delivery: " + receipt.status().message());
  }
  Delivery d;
  d.id = a[0].str;
  d.receipt = signer.Issue(queue, *receipt);
  d.payload = std::move(record.payload);
  d.binary = record.binary;
  d.headers = std::move(record.headers);
  d.attempt = static_cast<int32_t>(a[2].AsInt());
  d.due_at_ms = a[4].AsInt();
  d.lease_deadline_ms = a[5].AsInt();
  d.max_attempts = static_cast<int32_t>(a[6].AsInt());
  d.key = a[7].str;
  d.priority = record.priority;
  d.group = std::move(record.group);
  return d;
}

}  // namespace

// Shard by shard from a random one, until `max` jobs or max_bytes of records are answered.
Result<std::vector<Delivery>> RedisQueue::ReserveNow(const std::string& queue, const ReserveRequest& request) {
  auto info = Info(queue, false);  // a reserve creates no queue
  if (!info.ok() && info.status().code() == Code::kNotFound) return std::vector<Delivery>{};
  if (!info.ok()) return info.status();
  const QueueView& q = *info;
  const int64_t lease = request.lease_ms.value_or(q.config.lease_ms);
  int start;  // the shard to try first (rng_ is shared: under mu_, found by ThreadSanitizer)
  {
    std::lock_guard lock(mu_);
    start = q.shards > 1 ? static_cast<int>(rng_() % static_cast<uint64_t>(q.shards)) : 0;
  }
  const auto signer = Signer();
  const ShardLimits limits = LimitsPerShard(q.config, q.shards);
  std::vector<Delivery> out;
  int64_t bytes = 0;  // of the stored records answered, against request.max_bytes
  for (int k = 0;
       k < q.shards && static_cast<int32_t>(out.size()) < request.max && (out.empty() || bytes < request.max_bytes);
       ++k) {
    const int shard = (start + k) % q.shards;
    const int32_t want = request.max - static_cast<int32_t>(out.size());
    auto args = ReserveArgs(options_.consumer, want, lease, request.max_bytes - bytes, out.empty(), limits,
                            q.config.priority_aging_ms);
    auto v = [&] {
      DeliveryFirst::Delivery first(delivery_first_);
      return Run(kReserveScript, q, shard, args, true);
    }();
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    int64_t deadline = Clock::kNever;
    for (const auto& row : v->array) {
      if (row.type == Value::kInteger) {  // flow control held ready jobs back
        NoteFlowLimited(queue, shard, row.integer);
        continue;
      }
      if (row.array.size() < 8) continue;
      bytes += static_cast<int64_t>(row.array[1].str.size());
      auto d = DecodeDelivery(row.array, *signer, queue);
      if (!d.ok()) return d.status();
      deadline = d->lease_deadline_ms;
      out.push_back(std::move(*d));
    }
    if (deadline != Clock::kNever) NoteLease(queue, shard, deadline);  // the same for the whole batch
  }
  return out;
}

Result<std::vector<Delivery>> RedisQueue::Reserve(std::string_view queue, const ReserveRequest& request) {
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto future = promise->get_future();
  ReserveAsync(queue, request, [promise](Result<std::vector<Delivery>> r) { promise->set_value(std::move(r)); });
  return future.get();
}

uint64_t RedisQueue::ReserveAsync(std::string_view queue_view, const ReserveRequest& request, ReserveCallback done) {
  Status valid = ValidateQueueName(queue_view);
  if (valid.ok()) valid = ValidateReserve(request);
  if (!valid.ok()) {
    done(valid);
    return 0;
  }
  const std::string queue(queue_view);
  auto now = ReserveNow(queue, request);
  if (!now.ok() || !now->empty() || request.wait_ms == 0) {
    done(std::move(now));
    return 0;
  }
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      const uint64_t handle = next_waiter_++;
      waiters_.emplace(handle, Waiter{queue, request, SteadyMs() + request.wait_ms, std::move(done)});
      queues_[queue].waiters.push_back(handle);
      ready_notices_.insert(queue);  // a job may have become ready since ReserveNow looked
      Poke();
      return handle;
    }
  }
  done(std::vector<Delivery>{});
  return 0;
}

void RedisQueue::CancelReserve(uint64_t handle) {
  ReserveCallback done;
  {
    std::lock_guard lock(mu_);
    auto it = waiters_.find(handle);
    if (it == waiters_.end()) {
      // Being served right now (ServeWaiters holds it while a reserve runs): answered there.
      if (serving_.contains(handle)) cancelled_while_serving_.insert(handle);
      return;
    }
    done = std::move(it->second.done);
    const std::string queue = it->second.queue;
    waiters_.erase(it);
    DropIfUnusedLocked(queue);
  }
  done(std::vector<Delivery>{});
}

// A receipt the scripts refused: "N" (no such job) or "E:<state>:<attempt>:<max>" (its delivery
// is over), told as the embedded store tells it (LocateReceiptLocked): went dead; delivered
// again (reserved now, with another token); or nacked, rescheduled or replaced since.
Status RedisQueue::DeliveryError(const std::string& code, const Ulid& id) {
  const std::string sid = id.ToString();
  if (code == "L") return errors::ReleasedTooLate(sid);
  if (code.rfind("E:", 0) != 0) return errors::DeliveryJobGone(sid);
  const char state = code.size() > 2 ? code[2] : '?';
  int attempt = 0, max = 0;
  std::sscanf(code.c_str() + std::min<size_t>(code.size(), 4), "%d:%d", &attempt, &max);
  if (state == 'd') return errors::DeliveryWentDead(sid, attempt, max);
  if (state == 'r') return errors::DeliveredAgain(sid, attempt);
  return errors::DeliveryOver(sid);
}

// Ack and release: each receipt opened (repeats answer what the first did), grouped by shard, and
// one script per shard (all sent at once, RunAll) with (id, token) pairs and `tail`'s arguments for
// those receipts (by index) after them;
// the script answers "O" per receipt it acted on, else a code DeliveryError reads ("L": a lease
// that already ran out).
std::vector<Status> RedisQueue::PerReceipt(std::string_view queue_view, std::span<const std::string> receipts,
                                           const Script& script, const TailFn& tail) {
  std::vector<Status> out(receipts.size());
  auto info = Info(queue_view, false);
  if (!info.ok()) {
    std::fill(out.begin(), out.end(), info.status());
    return out;
  }
  const QueueView& q = *info;
  std::vector<std::vector<size_t>> by_shard(static_cast<size_t>(q.shards));
  std::vector<Result<Receipt>> opened = ParseReceipts(receipts);
  std::vector<Receipt> parsed(receipts.size());
  const std::vector<size_t> first = FirstOccurrences(opened);
  const auto signer = Signer();
  for (size_t i = 0; i < receipts.size(); ++i) {
    if (first[i] != i) continue;
    auto r = signer->Open(q.name, receipts[i], opened[i]);
    if (!r.ok()) {
      out[i] = r.status();
      continue;
    }
    parsed[i] = *r;
    by_shard[static_cast<size_t>(q.ShardOfId(parsed[i].id))].push_back(i);
  }
  std::vector<std::pair<int, std::vector<std::string>>> shard_args;
  for (int shard = 0; shard < q.shards; ++shard) {
    const auto& members = by_shard[static_cast<size_t>(shard)];
    if (members.empty()) continue;
    std::vector<std::string> args = {std::to_string(members.size())};
    for (size_t i : members) {
      args.push_back(parsed[i].id.ToString());
      args.push_back(parsed[i].token.Hex());
    }
    for (auto& a : tail(q, members)) args.push_back(std::move(a));
    shard_args.emplace_back(shard, std::move(args));
  }
  auto answers = RunAll(script, q, shard_args, true);  // the shards' parts at once
  for (size_t p = 0; p < shard_args.size(); ++p) {
    const auto& members = by_shard[static_cast<size_t>(shard_args[p].first)];
    const auto& v = answers[p];
    for (size_t j = 0; j < members.size(); ++j) {
      const size_t i = members[j];
      if (!v.ok()) {
        out[i] = v.status();
      } else if (v->is_error()) {
        out[i] = ScriptError(*v);
      } else if (j < v->array.size() && v->array[j].str != "O") {
        out[i] = DeliveryError(v->array[j].str, parsed[i].id);
      }
    }
    // After the answers, the ack script's completion time when it kept jobs completed.
    if (v.ok() && !v->is_error() && v->array.size() > members.size()) {
      NoteCompleted(q.name, shard_args[p].first, v->array[members.size()].AsInt());
    }
  }
  for (size_t i = 0; i < receipts.size(); ++i) out[i] = out[first[i]];
  return out;
}

std::vector<Status> RedisQueue::AckBatch(std::string_view queue, std::span<const AckRequest> all) {
  return AckWithValidResults(all, [&](std::span<const AckRequest> requests) { return AckValid(queue, requests); });
}

std::vector<Status> RedisQueue::AckValid(std::string_view queue, std::span<const AckRequest> requests) {
  std::vector<std::string> receipts;
  receipts.reserve(requests.size());
  for (const auto& r : requests) receipts.push_back(r.receipt);
  // After the pairs: a lease less wakes reserves held by a cap (1|0); then how long the queue keeps
  // completed jobs (0: deleted, unless someone waits for one) and, when any is given, each
  // receipt's result ("" for none).
  return PerReceipt(queue, receipts, kAckScript, [&](const QueueView& q, const std::vector<size_t>& members) {
    std::vector<std::string> tail = {HasLeaseCaps(q.config) ? "1" : "0", std::to_string(q.config.keep_completed_ms)};
    const bool results = std::any_of(members.begin(), members.end(), [&](size_t i) { return requests[i].result; });
    if (q.config.keep_completed_ms > 0 || results) {
      for (size_t i : members) tail.push_back(requests[i].result.value_or(""));
    }
    return tail;
  });
}

std::vector<Status> RedisQueue::ReleaseBatch(std::string_view queue, std::span<const std::string> receipts) {
  return PerReceipt(queue, receipts, kReleaseScript,
                    [](const QueueView&, const std::vector<size_t>&) { return std::vector<std::string>{"-"}; });
}

Result<NackResult> RedisQueue::Nack(std::string_view queue_view, const NackRequest& request) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const QueueView& q = *info;
  auto receipt = Signer()->Open(q.name, request.receipt);
  if (!receipt.ok()) return receipt.status();
  DELAYQ_RETURN_IF_ERROR(ValidateNack(request, q.config));
  double unit;  // uniform in [0, 1), as the embedded store draws it for BackoffDelayMs
  {
    std::lock_guard lock(mu_);
    unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  const BackoffPolicy& b = q.config.backoff;
  const int shard = q.ShardOfId(receipt->id);
  auto v = Run(
      kNackScript, q, shard,
      {receipt->id.ToString(), receipt->token.Hex(), std::to_string(request.retry_in_ms.value_or(-1)),
       NackErrorText(request), request.dead ? "1" : "0", std::to_string(b.base_ms), fmt::format("{}", b.factor),
       std::to_string(b.max_ms), fmt::format("{}", b.jitter * (2.0 * unit - 1.0)), HasLeaseCaps(q.config) ? "1" : "0"},
      true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->type != Value::kArray) return DeliveryError(v->str, receipt->id);
  NackResult r;
  r.state = v->array[0].str == "d" ? JobState::kDead : JobState::kScheduled;
  r.due_at_ms = v->array[1].AsInt();
  if (r.state == JobState::kDead) {
    if (v->array.size() > 2) NoteDeath(q.name, shard, v->array[2].AsInt());
    spdlog::warn("{}", errors::DeadJobWarning(q.name, receipt->id.ToString(), 0, NackErrorText(request)));
  }
  NoteReady(q.name);
  return r;
}

Result<TouchResult> RedisQueue::Touch(std::string_view queue_view, const TouchRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateTouch(request));
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const QueueView& q = *info;
  auto receipt = Signer()->Open(q.name, request.receipt);
  if (!receipt.ok()) return receipt.status();
  const int shard = q.ShardOfId(receipt->id);
  auto v =
      Run(kTouchScript, q, shard,
          {receipt->id.ToString(), receipt->token.Hex(), std::to_string(request.lease_ms.value_or(q.config.lease_ms)),
           std::to_string(kClaimIdleMs), options_.consumer, request.progress ? "|" + *request.progress : std::string()},
          true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->type != Value::kInteger) return DeliveryError(v->str, receipt->id);
  NoteLease(q.name, shard, v->integer);
  return TouchResult{v->integer};
}

}  // namespace delayq::redis
