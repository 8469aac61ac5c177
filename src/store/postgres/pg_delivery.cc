// Deliveries on the PostgreSQL store: reserve (now, or waiting in this process), ack, release,
// nack, touch. The twin of the Redis store's redis_delivery.cc; reserve and ack are
// delayq._reserve and _ack, the others one UPDATE that names the delivery it settles.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <future>

#include "core/ack_results.h"
#include "core/backoff.h"
#include "core/delivery_token.h"
#include "core/errors.h"
#include "core/flow_control.h"
#include "core/validate.h"
#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {
namespace {

// A Postgres text[] literal of ids or hex tokens (neither needs quoting).
std::string ArrayOf(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    out += items[i];
  }
  out.push_back('}');
  return out;
}

// `n` fresh delivery tokens as a Postgres text[] literal, for delayq._reserve to hand out: drawn
// here from the thread's random pool (core/random.h) rather than by three gen_random_uuid() a job
// in the database, where they were over a quarter of a reserve's cost.
std::string FreshTokens(int64_t n) {
  std::string out = "{";
  out.reserve(static_cast<size_t>(n) * 33 + 2);
  for (int64_t i = 0; i < n; ++i) {
    if (i) out.push_back(',');
    DeliveryToken::Random().AppendHexTo(out);
  }
  out.push_back('}');
  return out;
}

// What a nack did: the job's state and due time, and when it died (when it did).
struct NackOutcome {
  NackResult result;
  int64_t dead_at_ms = 0;
};

// The nack of delivery (id, token) in the caller's transaction: nothing (the delivery is over) or
// what it did. Times are read in the UPDATE, with the row held (the SELECT may have waited for it).
Result<std::optional<NackOutcome>> ApplyNack(Connection& c, const std::string& queue, const std::string& id,
                                             const std::string& token, const NackRequest& request,
                                             const BackoffPolicy& backoff, double unit) {
  auto r = c.Exec(
      "SELECT attempt, max_attempts, due_at_ms FROM delayq.jobs "
      "WHERE queue = $1 AND id = $2 AND state <> 'd' AND token = $3 FOR UPDATE",
      {Param::Of(queue), Param::Of(id), Param::Of(token)});
  if (!r.ok()) return r.status();
  if (r->empty()) return std::optional<NackOutcome>{};
  const auto attempt = static_cast<int32_t>(r->Int(0, 0)), max = static_cast<int32_t>(r->Int(0, 1));
  const std::string error = ValidText(NackErrorText(request), Limits::kMaxErrorText);
  if (request.dead || attempt >= max) {  // a job that goes dead keeps its due time
    auto dead = c.Exec(
        "UPDATE delayq.jobs SET state = 'd', dead_at_ms = delayq.now_ms(), last_error = $3, token = NULL, "
        "lease_deadline_ms = NULL WHERE queue = $1 AND id = $2 RETURNING dead_at_ms, delayq._outcome(queue, id, "
        "'dead')",
        {Param::Of(queue), Param::Of(id), Param::Of(error)});
    if (!dead.ok()) return dead.status();
    return std::optional(NackOutcome{{JobState::kDead, r->Int(0, 2)}, dead->Int(0, 0)});
  }
  const int64_t delay = request.retry_in_ms.value_or(BackoffDelayMs(backoff, attempt, unit));
  auto retry = c.Exec(
      "UPDATE delayq.jobs SET state = 's', due_at_ms = delayq.now_ms() + $3, last_error = $4, token = NULL, "
      "lease_deadline_ms = NULL, waited = true WHERE queue = $1 AND id = $2 RETURNING due_at_ms",
      {Param::Of(queue), Param::Of(id), Param::Of(delay), Param::Of(error)});
  if (!retry.ok()) return retry.status();
  return std::optional(NackOutcome{{JobState::kScheduled, retry->Int(0, 0)}, 0});
}

}  // namespace

Result<std::vector<Delivery>> PostgresQueue::Reserve(std::string_view queue, const ReserveRequest& request) {
  std::promise<Result<std::vector<Delivery>>> answer;
  auto got = answer.get_future();
  ReserveAsync(queue, request, [&answer](Result<std::vector<Delivery>> r) { answer.set_value(std::move(r)); });
  return got.get();
}

uint64_t PostgresQueue::ReserveAsync(std::string_view queue_view, const ReserveRequest& request, ReserveCallback done) {
  if (Status s = ValidateQueueName(queue_view); !s.ok()) {
    done(s);
    return 0;
  }
  if (Status s = ValidateReserve(request); !s.ok()) {
    done(s);
    return 0;
  }
  const std::string queue(queue_view);
  auto now = ReserveNow(queue, request);
  if (!now.ok() || !now->empty() || request.wait_ms <= 0) {
    done(std::move(now));
    return 0;
  }
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    done(std::vector<Delivery>{});
    return 0;
  }
  const uint64_t handle = next_waiter_++;
  waiters_[handle] = Waiter{queue, request, SteadyMs() + request.wait_ms, std::move(done)};
  waiting_[queue].push_back(handle);
  // Looked at once more now that it waits: a job that came between the reserve above and this
  // (its notification found no waiter) is served.
  to_serve_.insert(queue);
  poked_ = true;
  cv_.notify_all();
  return handle;
}

void PostgresQueue::CancelReserve(uint64_t handle) {
  ReserveCallback done;
  {
    std::lock_guard lock(mu_);
    auto it = waiters_.find(handle);
    if (it == waiters_.end()) return;
    done = std::move(it->second.done);
    auto& line = waiting_[it->second.queue];
    std::erase(line, handle);
    if (line.empty()) waiting_.erase(it->second.queue);
    waiters_.erase(it);
  }
  done(std::vector<Delivery>{});
}

Result<std::vector<Delivery>> PostgresQueue::ReserveNow(const std::string& queue, const ReserveRequest& request,
                                                        int64_t* look_again_ms) {
  auto r = Exec(
      "SELECT id, payload, is_binary, headers, attempt, max_attempts, due_at_ms, key, lease_deadline_ms, priority, "
      "grp, first, now_ms, token FROM delayq._reserve($1, $2, $3, $4, $5::text[])",
      {Param::Of(queue), Param::Of(static_cast<int64_t>(request.max)), Param::Maybe(request.lease_ms),
       Param::Of(request.max_bytes), Param::Of(FreshTokens(request.max))});
  if (!r.ok()) return r.status();
  if (r->size() == 1 && r->IsNull(0, 0)) {  // flow control or ready order: the shared C++ rules
    int64_t ignored = Clock::kNever;
    return ReserveControlled(queue, request, look_again_ms ? look_again_ms : &ignored);
  }
  return Deliveries(queue, *r, {});
}

Result<std::vector<Delivery>> PostgresQueue::Deliveries(const std::string& queue, const Rows& r,
                                                        const std::map<std::string, LatenessSplit>& splits) {
  std::vector<Delivery> out;
  if (r.empty()) return out;
  const std::shared_ptr<const ReceiptSigner> signer = Signer();
  out.reserve(static_cast<size_t>(r.size()));
  int64_t lease_end = Clock::kNever;
  std::vector<LatenessSplit> samples;
  for (int i = 0; i < r.size(); ++i) {
    Delivery d;
    d.id = r.Str(i, 0);
    auto id = Ulid::Parse(d.id);
    auto token = DeliveryToken::Parse(r.Text(i, 13));
    if (!id || !token) return Status::Corruption("a reserve answered a job id or token delayq cannot read");
    d.receipt = signer->Issue(queue, Receipt{*id, *token, std::nullopt});
    d.payload = r.Bytes(i, 1);
    d.binary = r.Bool(i, 2);
    if (!r.IsNull(i, 3)) {
      auto h = ParseHeaders(r.Text(i, 3));
      if (!h.ok()) return h.status();
      d.headers = std::move(*h);
    }
    d.attempt = static_cast<int32_t>(r.Int(i, 4));
    d.max_attempts = static_cast<int32_t>(r.Int(i, 5));
    d.due_at_ms = r.Int(i, 6);
    d.key = r.Str(i, 7);
    d.lease_deadline_ms = r.Int(i, 8);
    d.priority = static_cast<int32_t>(r.Int(i, 9));
    d.group = r.Str(i, 10);
    if (r.Bool(i, 11)) {
      auto split = splits.find(d.id);
      samples.push_back(split != splits.end()
                            ? split->second
                            : LatenessSplit{std::max<int64_t>(0, r.Int(i, 12) - d.due_at_ms) * 1000, -1});
    }
    lease_end = std::min(lease_end, d.lease_deadline_ms);
    out.push_back(std::move(d));
  }
  {
    std::lock_guard lock(mu_);
    Metrics& m = MetricsLocked(queue);
    m.counters.delivered += out.size();
    for (const LatenessSplit& s : samples) {
      m.lateness.Record(s.late_us);
      if (s.limit_wait_us >= 0) m.limit_wait.Record(s.limit_wait_us);
    }
  }
  NoteLease(lease_end);
  return out;
}

std::shared_ptr<const ReceiptSigner> PostgresQueue::Signer() {
  std::lock_guard lock(mu_);
  return signer_;
}

Status PostgresQueue::KnownQueue(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  return ConfigOf(std::string(queue)).status();
}

Result<Receipt> PostgresQueue::OpenReceipt(const std::string& queue, std::string_view receipt) {
  return Signer()->Open(queue, receipt);
}

Status PostgresQueue::DeliveryError(const std::string& queue, const std::string& id, const std::string& token) {
  auto r = Exec("SELECT state, attempt, max_attempts, token = $3 FROM delayq.jobs WHERE queue = $1 AND id = $2",
                {Param::Of(queue), Param::Of(id), Param::Of(token)});
  if (!r.ok()) return r.status();
  if (r->empty()) return errors::DeliveryJobGone(id);
  const std::string_view state = r->Text(0, 0);
  const auto attempt = static_cast<int32_t>(r->Int(0, 1)), max = static_cast<int32_t>(r->Int(0, 2));
  if (state == "d") return errors::DeliveryWentDead(id, attempt, max);
  if (state == "r" && !r->Bool(0, 3)) return errors::DeliveredAgain(id, attempt);
  return errors::DeliveryOver(id);  // waiting again, or still this delivery with its lease run out
}

// One call of delayq._ack for the opened receipts: with the queue's keep_completed_ms above 0, or
// for a job someone waits for, the jobs are kept completed, with their results (and the sweep is
// planned for them).
Result<Rows> PostgresQueue::AckRows(const std::string& queue, const std::vector<std::string>& ids,
                                    const std::vector<std::string>& tokens,
                                    const std::vector<std::optional<std::string>>& results) {
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  std::vector<std::string> texts;
  texts.reserve(results.size());
  for (const auto& r : results) texts.push_back(r.value_or(""));
  auto r =
      Exec("SELECT outcome, state, attempt, max_attempts FROM delayq._ack($1, $2::text[], $3::text[], $4, $5::text[])",
           {Param::Of(queue), Param::Of(ArrayOf(ids)), Param::Of(ArrayOf(tokens)), Param::Of(config->keep_completed_ms),
            Param::Of(TextArray(texts))});
  if (r.ok()) {
    std::lock_guard lock(mu_);
    if (next_sweep_.Note(DbNowLocked() + CompletedSweepAfterMs(*config))) {
      poked_ = true;
      cv_.notify_all();
    }
  }
  return r;
}

// Each receipt opened (repeats answer what the first did), then one call of delayq._ack for all.
std::vector<Status> PostgresQueue::AckBatch(std::string_view queue, std::span<const AckRequest> all) {
  return AckWithValidResults(all, [&](std::span<const AckRequest> requests) { return AckValid(queue, requests); });
}

std::vector<Status> PostgresQueue::AckValid(std::string_view queue_view, std::span<const AckRequest> receipts) {
  std::vector<Status> out(receipts.size());
  if (Status s = KnownQueue(queue_view); !s.ok()) {
    std::fill(out.begin(), out.end(), s);
    return out;
  }
  const std::string queue(queue_view);
  std::vector<std::string> texts;
  texts.reserve(receipts.size());
  for (const auto& r : receipts) texts.push_back(r.receipt);
  const auto parsed = ParseReceipts(texts);
  const auto first = FirstOccurrences(std::span<const Result<Receipt>>(parsed));
  const std::shared_ptr<const ReceiptSigner> signer = Signer();
  std::vector<std::string> ids, tokens;
  std::vector<std::optional<std::string>> results;
  std::vector<size_t> at;
  for (size_t i = 0; i < receipts.size(); ++i) {
    if (first[i] != i) continue;
    auto opened = signer->Open(queue, texts[i], parsed[i]);
    if (!opened.ok()) {
      out[i] = opened.status();
      continue;
    }
    ids.push_back(opened->id.ToString());
    tokens.push_back(opened->token.Hex());
    results.push_back(receipts[i].result);
    at.push_back(i);
  }
  if (!ids.empty()) {
    auto r = AckRows(queue, ids, tokens, results);
    uint64_t acked = 0;
    for (size_t k = 0; k < at.size(); ++k) {
      if (!r.ok()) {
        out[at[k]] = r.status();
        continue;
      }
      const auto row = static_cast<int>(k);
      const std::string_view outcome = r->Text(row, 0), state = r->Text(row, 1);
      const auto attempt = static_cast<int32_t>(r->Int(row, 2)), max = static_cast<int32_t>(r->Int(row, 3));
      if (outcome == "O") {
        ++acked;
      } else if (outcome == "N") {
        out[at[k]] = errors::DeliveryJobGone(ids[k]);
      } else if (state == "d") {
        out[at[k]] = errors::DeliveryWentDead(ids[k], attempt, max);
      } else if (state == "r") {
        out[at[k]] = errors::DeliveredAgain(ids[k], attempt);
      } else {
        out[at[k]] = errors::DeliveryOver(ids[k]);
      }
    }
    if (acked > 0) {
      {
        std::lock_guard lock(mu_);
        MetricsLocked(queue).counters.acked += acked;
      }
      auto config = ConfigOf(queue);
      if (config.ok() && HasLeaseCaps(*config)) AnnounceReady(queue);  // room under max_reserved
    }
  }
  for (size_t i = 0; i < receipts.size(); ++i) {
    if (first[i] != i) out[i] = out[first[i]];
  }
  return out;
}

// Each delivery that is still current and whose lease has not run out is undone: the job waits
// again in its place, and the delivery counts neither as an attempt nor as a delivery.
std::vector<Status> PostgresQueue::ReleaseBatch(std::string_view queue_view, std::span<const std::string> receipts) {
  std::vector<Status> out(receipts.size());
  if (Status s = KnownQueue(queue_view); !s.ok()) {
    std::fill(out.begin(), out.end(), s);
    return out;
  }
  const std::string queue(queue_view);
  const auto first = FirstOccurrences(receipts);
  uint64_t released = 0;
  for (size_t i = 0; i < receipts.size(); ++i) {
    if (first[i] != i) {
      out[i] = out[first[i]];
      continue;
    }
    auto receipt = OpenReceipt(queue, receipts[i]);
    if (!receipt.ok()) {
      out[i] = receipt.status();
      continue;
    }
    const std::string id = receipt->id.ToString();
    auto r = Exec(
        "UPDATE delayq.jobs SET state = 's', attempt = attempt - 1, token = NULL, lease_deadline_ms = NULL "
        "WHERE queue = $1 AND id = $2 AND state = 'r' AND token = $3 AND lease_deadline_ms > delayq.now_ms() "
        "RETURNING id",
        {Param::Of(queue), Param::Of(id), Param::Of(receipt->token.Hex())});
    if (!r.ok()) {
      out[i] = r.status();
    } else if (!r->empty()) {
      ++released;
    } else {
      auto check = Exec("SELECT state = 'r' AND token = $3 FROM delayq.jobs WHERE queue = $1 AND id = $2",
                        {Param::Of(queue), Param::Of(id), Param::Of(receipt->token.Hex())});
      if (!check.ok()) {
        out[i] = check.status();
      } else if (!check->empty() && check->Bool(0, 0)) {
        out[i] = errors::ReleasedTooLate(id);  // still its delivery, but the lease ran out
      } else {
        out[i] = DeliveryError(queue, id, receipt->token.Hex());
      }
    }
  }
  if (released > 0) {
    {
      std::lock_guard lock(mu_);
      Metrics& m = MetricsLocked(queue);
      m.counters.delivered -= std::min(m.counters.delivered, released);
    }
    AnnounceReady(queue);
  }
  return out;
}

Result<NackResult> PostgresQueue::Nack(std::string_view queue_view, const NackRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  auto receipt = OpenReceipt(queue, request.receipt);
  if (!receipt.ok()) return receipt.status();
  DELAYQ_RETURN_IF_ERROR(ValidateNack(request, *config));
  const std::string id = receipt->id.ToString();
  double unit;  // uniform in [0, 1), as the embedded store draws it for BackoffDelayMs
  {
    std::lock_guard lock(mu_);
    unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  std::optional<NackOutcome> outcome;
  Status s;
  {
    auto c = Borrow();
    if (!c.ok()) return c.status();
    s = InTransaction(**c, [&]() -> Status {
      auto applied = ApplyNack(**c, queue, id, receipt->token.Hex(), request, config->backoff, unit);
      if (!applied.ok()) return applied.status();
      outcome = *applied;
      return Status::Ok();
    });
  }  // the connection is given back before the statements below take one
  if (!s.ok()) return s;
  if (!outcome) return DeliveryError(queue, id, receipt->token.Hex());
  const NackResult result = outcome->result;
  const int64_t now_of_death = outcome->dead_at_ms;
  {
    std::lock_guard lock(mu_);
    Metrics& m = MetricsLocked(queue);
    ++m.counters.nacked;
    if (result.state == JobState::kDead) ++m.counters.dead;
  }
  if (result.state == JobState::kDead) {
    NoteDeath(queue, now_of_death);
    spdlog::warn("{}", errors::DeadJobWarning(queue, id, 0, NackErrorText(request)));
  }
  int64_t now;
  {
    std::lock_guard lock(mu_);
    now = DbNowLocked();
  }
  if (result.state == JobState::kDead || result.due_at_ms <= now) {
    AnnounceReady(queue);
  } else {
    (void)Exec("SELECT delayq._wake($1, $2, delayq.now_ms())", {Param::Of(queue), Param::Of(result.due_at_ms)});
  }
  return result;
}

Result<TouchResult> PostgresQueue::Touch(std::string_view queue_view, const TouchRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateTouch(request));
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  auto config = ConfigOf(queue);
  if (!config.ok()) return config.status();
  auto receipt = OpenReceipt(queue, request.receipt);
  if (!receipt.ok()) return receipt.status();
  const std::string id = receipt->id.ToString();
  // A progress (NULL: none) replaces the delivery's last one; without one, both stay as they are.
  auto r = Exec(
      "UPDATE delayq.jobs SET lease_deadline_ms = delayq.now_ms() + $4, progress = coalesce($5::json, progress), "
      "progress_token = CASE WHEN $5 IS NULL THEN progress_token ELSE token END WHERE queue = $1 AND id = $2 AND "
      "state = 'r' AND token = $3 AND lease_deadline_ms > delayq.now_ms() RETURNING lease_deadline_ms",
      {Param::Of(queue), Param::Of(id), Param::Of(receipt->token.Hex()),
       Param::Of(request.lease_ms.value_or(config->lease_ms)),
       request.progress ? Param::Of(*request.progress) : Param::Null()});
  if (!r.ok()) return r.status();
  if (r->empty()) return DeliveryError(queue, id, receipt->token.Hex());
  NoteLease(r->Int(0, 0));
  return TouchResult{r->Int(0, 0)};
}

}  // namespace delayq::postgres
