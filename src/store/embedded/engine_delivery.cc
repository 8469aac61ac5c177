// Deliveries and their end: reserve, ack, nack, touch (the dead-letter queue is in
// engine_dead.cc).
//
// A reserve rewrites only the job's due entry (attempt, delivery token, lease deadline, and the
// record when it is inline there: keys.h); a record in `jobs` changes only on nack, dead,
// reschedule and replay.
// A lease that expires changes nothing on disk: the due record still says "reserved until T",
// and T has passed, which recovery reads as "ready again".
#include <spdlog/spdlog.h>

#include <future>

#include "core/backoff.h"
#include "core/errors.h"
#include "core/mutant.h"
#include "core/validate.h"
#include "store/embedded/engine_impl.h"

namespace delayq {
namespace {

// Before an ack batch takes the lock: sizes `out`, parses and opens the receipts, and marks the
// first of each repeated one. False (every answer in `out` says why) when the queue name is bad.
bool OpenReceipts(const ReceiptSigner& signer, std::string_view queue, std::span<const std::string> receipts,
                  std::vector<Result<Receipt>>* parsed, std::vector<size_t>* first, std::vector<Status>* out) {
  out->assign(receipts.size(), Status::Ok());
  Status valid = ValidateQueueName(queue);
  if (!valid.ok()) {
    std::fill(out->begin(), out->end(), valid);
    return false;
  }
  // A receipt given twice is acked once, and every copy answers what the first did.
  *parsed = ParseReceipts(receipts);
  *first = FirstOccurrences(*parsed);
  for (size_t i = 0; i < receipts.size(); ++i) (*parsed)[i] = signer.Open(queue, receipts[i], (*parsed)[i]);
  return true;
}

// Each repeated receipt answers what its first did; a first that went well answers the
// durability's outcome.
void AnswerAckBatch(const std::vector<size_t>& first, const Status& durable, std::vector<Status>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    if (first[i] != i) {
      out[i] = out[first[i]];
    } else if (out[i].ok() && !durable.ok()) {
      out[i] = durable;
    }
  }
}

// A first delivery's lateness: late until a limit (the queue's, or its group's cap) started
// holding it, then held back by the limit (SplitLateness).
void RecordLateness(QueueState* q, const ReservePlan& plan, int64_t due_ms, const std::string& group,
                    const Instant& now) {
  int64_t since = plan.limited_since_us;
  if (auto g = plan.group_since.find(group); g != plan.group_since.end()) since = std::min(since, g->second);
  q->flow.RecordFirstDelivery(q->lateness, due_ms * 1000, since, now.wall_us);
}

// The payload-of-another mutant (core/mutant.h): one delivery in 10 carries the payload of the
// delivery before it.
void SwapInAnotherPayload(std::string& payload) {
  static std::string last;  // under the engine's lock, as every reserve
  std::string mine = payload;
  if (MutantStrikes("payload-of-another", 10) && !last.empty()) payload = last;
  last = std::move(mine);
}

}  // namespace

Result<std::vector<Delivery>> EngineImpl::ReserveLocked(QueueState* q, int32_t max, int64_t max_bytes, int64_t lease_ms,
                                                        const Instant& now) {
  if ((q->meta.paused && !Mutant("ignore-pause")) || q->ready.empty()) return std::vector<Delivery>{};  // core/mutant.h
  const QueueConfig& config = ConfigOf(q);
  ReservePlan plan;
  plan.limited_since_us = q->flow.limited_since_us();  // before this reserve: for its lateness samples
  plan.max = ReserveAllowanceLocked(q, config, max, now);
  if (plan.max == 0) return std::vector<Delivery>{};
  plan.max_bytes = max_bytes;
  plan.deadline_ms = now.wall_ms() + lease_ms;
  plan.deadline_mono_us = now.mono_us + lease_ms * 1000;
  plan.batch = storage_->NewBatch();
  DELAYQ_RETURN_IF_ERROR(q->ready.ordered() ? PlanReadyOrderLocked(q, config, now, plan) : PlanDueOrderLocked(q, plan));
  DELAYQ_RETURN_IF_ERROR(ApplyReserveLocked(q, config, plan, now));
  return std::move(plan.out);
}

// Flow control (flow_state.h): a waiting reserve held back by the rate is served again when the
// next token comes (a lease that ends serves those held by max_reserved).
int32_t EngineImpl::ReserveAllowanceLocked(QueueState* q, const QueueConfig& config, int32_t max, const Instant& now) {
  const FlowState::Allowance allowance = q->flow.Allow(config, max, static_cast<int64_t>(q->ready.size()), q->leases,
                                                       !q->ready.ordered(), now.wall_us, now.mono_us);
  if (allowance.next_token_mono_us != Clock::kNever) PlanFlowWakeLocked(q, allowance.next_token_mono_us);
  return allowance.max;
}

// Makes one candidate a delivery in the plan: false when its record would take the answer over
// max_bytes (the answer stops before it: the first job always comes; the Redis reserve script
// applies the same rule to the same encoded records).
Result<bool> EngineImpl::PlanPickLocked(QueueState* q, ReservePlan& plan, ReadyJobs::iterator it,
                                        const std::string& raw, const Status& read, bool in_due) {
  const DueKey& key = it->first;
  if (read.ok() && !AnswerFits(plan.bytes, static_cast<int64_t>(raw.size()), plan.max_bytes, plan.out.empty())) {
    return false;
  }
  if (read.code() == Code::kNotFound) {  // a bug: the index outlived its job
    spdlog::error("queue {}: ready job {} has no record; dropping it", q->name, key.id.ToString());
    plan.broken.push_back(it);
    return true;
  }
  DELAYQ_RETURN_IF_ERROR(read);
  plan.bytes += static_cast<int64_t>(raw.size());
  JobRecord record;
  DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(raw, &record));
  const DeliveryToken delivery = DeliveryToken::Random();  // the OS CSPRNG: receipts are unguessable
  const int32_t attempt = it->second.attempt + 1;
  DueRecord due{key.due_ms, attempt, delivery, plan.deadline_ms};
  due.priority = record.priority;
  due.group = record.group;
  if (in_due) due.record = raw;
  plan.batch->Put(Cf::kDue, DueIndexKey(q->name, key), EncodeDueRecord(due));
  Delivery d;
  d.id = key.id.ToString();
  d.receipt = signer_->Issue(q->name, Receipt{key.id, delivery});
  d.payload = std::move(record.payload);
  if (Mutant("payload-of-another")) SwapInAnotherPayload(d.payload);  // core/mutant.h
  d.binary = record.binary;
  d.headers = std::move(record.headers);
  d.attempt = attempt;
  d.max_attempts = record.max_attempts;
  d.due_at_ms = key.due_ms;
  d.key = std::move(record.key);
  d.lease_deadline_ms = plan.deadline_ms;
  d.priority = record.priority;
  d.group = std::move(record.group);
  plan.out.push_back(std::move(d));
  plan.picks.push_back({it, delivery, record.max_attempts, record.key_indexed, record.key_ttl_ms, in_due});
  return true;
}

// Due order. Records are read a few at a time, so an answer bounded by max_bytes never reads far
// past it. The chunk doubles after each read (8, 16, 32, 64): one batched read serves most of a
// big reserve, and what is read past the bound stays below what was already taken.
Status EngineImpl::PlanDueOrderLocked(QueueState* q, ReservePlan& plan) {
  std::vector<std::string> raws;
  std::vector<bool> in_due;
  size_t chunk = 8;
  auto next = q->ready.begin();
  while (next != q->ready.end() && plan.count() < plan.max) {
    std::vector<ReadyJobs::iterator> candidates;
    std::vector<DueKey> keys;
    for (; next != q->ready.end() && candidates.size() < chunk &&
           plan.count() + static_cast<int32_t>(candidates.size()) < plan.max;
         ++next) {
      candidates.push_back(next);
      keys.push_back(next->first);
    }
    chunk = std::min<size_t>(chunk * 2, 64);
    std::vector<Status> reads = ReadRecords(*storage_, q->name, keys, &raws, &in_due);
    for (size_t i = 0; i < candidates.size(); ++i) {
      auto picked = PlanPickLocked(q, plan, candidates[i], raws[i], reads[i], in_due[i]);
      if (!picked.ok()) return picked.status();
      if (!*picked) return Status::Ok();  // the answer is full
    }
  }
  return Status::Ok();
}

// ReadyOrder (core/ready_order.h): groups in turn, skipping those at group_max_reserved (counting
// what this reserve takes), the best priority within each. Jobs are picked one at a time (each
// pick ends its group's turn, which decides the next) but their records are read a chunk at a
// time, as in due order (8, 16, 32, 64): picks past where the answer fills up go back.
Status EngineImpl::PlanReadyOrderLocked(QueueState* q, const QueueConfig& config, const Instant& now,
                                        ReservePlan& plan) {
  const int64_t cap = config.group_max_reserved;
  ReadyOrderRules rules{config.priority_aging_ms, nullptr};
  if (cap > 0) {
    rules.full = [&](std::string_view group) {
      auto t = plan.taking.find(group);
      const bool full = GroupFullLocked(q, group, cap, t == plan.taking.end() ? 0 : t->second);
      // A group at its cap with ready jobs is held back by a limit from now on.
      if (full) q->flow.GroupHeld(group, now.wall_us);
      return full;
    };
  }
  size_t chunk = 8;
  while (plan.count() < plan.max) {
    OrderedChunk taken = TakeOrderedChunkLocked(q, now, rules, plan, chunk);
    if (taken.its.empty()) break;
    chunk = std::min<size_t>(chunk * 2, 64);
    std::vector<std::string> raws;
    std::vector<bool> in_due;
    std::vector<Status> reads = ReadRecords(*storage_, q->name, taken.keys, &raws, &in_due);
    for (size_t i = 0; i < taken.its.size(); ++i) {
      auto picked = PlanPickLocked(q, plan, taken.its[i], raws[i], reads[i], in_due[i]);
      if (!picked.ok() || !*picked) {
        PutBackLocked(q, plan, taken, i);      // not taken after all (their groups' turns are over, though)
        if (picked.ok()) return Status::Ok();  // the answer is full
        // A record that cannot be read: nothing is delivered, every pick goes back in the order.
        for (const ReservePlan::Pick& p : plan.picks) q->ready.Restore(p.it);
        for (ReadyJobs::iterator it : plan.broken) q->ready.Restore(it);
        return picked.status();
      }
    }
  }
  return Status::Ok();
}

// Up to `chunk` picks in ready order, each counted as taken (for the caps of the next picks) and
// its group served (since when its cap held it back goes with the jobs taken from it).
EngineImpl::OrderedChunk EngineImpl::TakeOrderedChunkLocked(QueueState* q, const Instant& now,
                                                            const ReadyOrderRules& rules, ReservePlan& plan,
                                                            size_t chunk) {
  OrderedChunk taken;
  while (taken.its.size() < chunk && plan.count() + static_cast<int32_t>(taken.its.size()) < plan.max) {
    auto pick = q->ready.Peek(now.wall_ms(), rules);
    if (!pick) break;
    taken.its.push_back(q->ready.Take(*pick));
    taken.keys.push_back(taken.its.back()->first);
    ++plan.taking[pick->group];
    const bool first = !plan.group_since.contains(pick->group);
    if (first) plan.group_since[pick->group] = q->flow.GroupServed(pick->group);
    taken.first_of_group.push_back(first);
    taken.groups.push_back(std::move(pick->group));
  }
  return taken;
}

// Puts the picks of `taken` from `from` on back in the order, undoing what taking them noted.
void EngineImpl::PutBackLocked(QueueState* q, ReservePlan& plan, const OrderedChunk& taken, size_t from) {
  for (size_t j = from; j < taken.its.size(); ++j) {
    q->ready.Restore(taken.its[j]);
    const std::string& group = taken.groups[j];
    if (--plan.taking[group] == 0) plan.taking.erase(group);
    if (taken.first_of_group[j]) {
      q->flow.GroupNotServed(group, plan.group_since[group]);
      plan.group_since.erase(group);
    }
  }
}

// Writes the plan's batch (a reserve is not waited on for durability: losing it only
// redelivers), then moves its jobs from ready to leased. A failed write changes nothing in memory.
Status EngineImpl::ApplyReserveLocked(QueueState* q, const QueueConfig& config, ReservePlan& plan, const Instant& now) {
  const bool ordered = q->ready.ordered();
  if (plan.batch->Count() > 0) {
    uint64_t seq;
    Status s = WriteLocked(*plan.batch, &seq);
    if (!s.ok()) {
      if (ordered) {  // nothing was delivered: back in the order
        for (const ReservePlan::Pick& p : plan.picks) q->ready.Restore(p.it);
        for (ReadyJobs::iterator it : plan.broken) q->ready.Restore(it);
      }
      return s;
    }
  }
  q->flow.Took(config, static_cast<int64_t>(plan.picks.size()));
  for (size_t i = 0; i < plan.picks.size(); ++i) {
    const ReservePlan::Pick& p = plan.picks[i];
    const DueKey key = p.it->first;
    ReadyInfo info = q->ready.Extract(p.it, ordered);
    --ready_entries_;
    AddLeaseLocked(key.id,
                   Lease{q, key, info.attempt + 1, p.max_attempts, p.delivery, plan.deadline_ms, plan.deadline_mono_us,
                         plan.out[i].key, p.key_indexed, p.key_ttl_ms, p.in_due, std::move(info.lane)});
    ++q->counters.delivered;
    if (!info.redelivery) RecordLateness(q, plan, key.due_ms, plan.out[i].group, now);
  }
  for (ReadyJobs::iterator it : plan.broken) {
    (void)q->ready.Extract(it, ordered);
    --ready_entries_;
    --q->live;
  }
  return Status::Ok();
}

Result<std::vector<Delivery>> EngineImpl::Reserve(std::string_view queue, const ReserveRequest& request) {
  if (request.wait_ms > 0) {
    auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
    auto future = promise->get_future();
    ReserveAsync(queue, request, [promise](Result<std::vector<Delivery>> r) { promise->set_value(std::move(r)); });
    return future.get();
  }
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateReserve(request));
  Op op(*this, Op::kReads);  // a reserve is not waited on for durability: losing it redelivers
  DELAYQ_RETURN_IF_ERROR(op.status());
  QueueState* q = FindQueueLocked(queue);  // a reserve creates no queue
  if (!q) return std::vector<Delivery>{};
  return ReserveLocked(q, request.max, request.max_bytes, request.lease_ms.value_or(ConfigOf(q).lease_ms), op.now());
}

uint64_t EngineImpl::ReserveAsync(std::string_view queue, const ReserveRequest& request, ReserveCallback done) {
  Status valid = ValidateQueueName(queue);
  if (valid.ok()) valid = ValidateReserve(request);
  if (!valid.ok()) {
    done(valid);
    return 0;
  }
  Op op(*this, Op::kReads);
  if (!op.status().ok()) {
    op.deferred().Add([done = std::move(done), open = op.status()] { done(open); });
    return 0;
  }
  // A reserve creates no queue; one that waits on a name that is not a queue yet waits on a
  // provisional one, which goes with its last waiter.
  QueueState* q = request.wait_ms > 0 ? QueueForWaiterLocked(queue) : FindQueueLocked(queue);
  if (!q) {
    op.deferred().Add([done = std::move(done)] { done(std::vector<Delivery>{}); });
    return 0;
  }
  auto result =
      ReserveLocked(q, request.max, request.max_bytes, request.lease_ms.value_or(ConfigOf(q).lease_ms), op.now());
  if (!result.ok() || !result->empty() || request.wait_ms == 0) {
    op.deferred().Add([done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
    return 0;
  }
  const int64_t deadline_mono_us = op.now().mono_us + request.wait_ms * 1000;
  const uint64_t handle = waiters_.Add(q, request, deadline_mono_us, std::move(done));
  PokeMonoLocked(deadline_mono_us);
  return handle;
}

void EngineImpl::CancelReserve(uint64_t handle) {
  ReserveCallback done;
  {
    std::lock_guard lock(mu_);
    std::optional<Waiter> w = waiters_.Take(handle);
    if (!w) return;
    done = std::move(w->done);
    DropIfUnusedLocked(w->queue);
  }
  done(std::vector<Delivery>{});
}

Status EngineImpl::LocateReceiptLocked(QueueState* q, const Receipt& receipt, ReceiptTarget* target, JobRecord* record,
                                       bool* have_record) {
  *have_record = false;
  auto id = [&] { return receipt.id.ToString(); };  // for the errors only
  if (const Lease* found = leases_.Find(receipt.id)) {
    const Lease& lease = *found;
    // (A receipt is signed for its queue, so `lease.queue != q` would be a forged one.)
    if (lease.queue != q) return errors::DeliveryJobGone(id());
    if (lease.delivery != receipt.token) return errors::DeliveredAgain(id(), lease.attempt);
    *target = {receipt.id, lease.key, true, lease.attempt, lease.delivery, lease.in_due, lease.lane};
    return Status::Ok();
  }
  bool in_due = false;
  Status s = ReadRecord(*storage_, q->name, receipt.id, nullptr, record, &in_due);
  if (s.code() == Code::kNotFound) return errors::DeliveryJobGone(id());
  DELAYQ_RETURN_IF_ERROR(s);
  *have_record = true;
  if (record->queue != q->name) return errors::DeliveryJobGone(id());
  if (record->dead) return errors::DeliveryWentDead(id(), record->attempt, record->max_attempts);
  DueKey key{record->due_at_ms, receipt.id};
  auto ready = q->ready.find(key);
  if (ready != q->ready.end() && ready->second.delivery == receipt.token) {
    *target = {receipt.id, key, false, ready->second.attempt, receipt.token, in_due, ready->second.lane};
    return Status::Ok();
  }
  return errors::DeliveryOver(id());
}

namespace {

std::vector<std::string> ReceiptsOf(std::span<const AckRequest> requests) {
  std::vector<std::string> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(r.receipt);
  return out;
}

}  // namespace

std::vector<Status> EngineImpl::AckBatch(std::string_view queue, std::span<const AckRequest> requests) {
  std::vector<Result<Receipt>> parsed;
  std::vector<size_t> first;
  std::vector<Status> out;
  if (!OpenReceipts(*signer_, queue, ReceiptsOf(requests), &parsed, &first, &out)) return out;
  Op op(*this, Op::kWrites);
  AckBatchLocked(op, queue, requests, parsed, first, out);
  AnswerAckBatch(first, op.Finish(), out);
  return out;
}

void EngineImpl::AckBatchAsync(std::string_view queue, std::span<const AckRequest> requests, AckCallback done) {
  std::vector<Result<Receipt>> parsed;
  std::vector<size_t> first;
  std::vector<Status> out;
  if (!OpenReceipts(*signer_, queue, ReceiptsOf(requests), &parsed, &first, &out)) return done(std::move(out));
  Op op(*this, Op::kWrites);
  AckBatchLocked(op, queue, requests, parsed, first, out);
  op.FinishAsync([done = std::move(done), first = std::move(first), out = std::move(out)](Status durable) mutable {
    AnswerAckBatch(first, durable, out);
    done(std::move(out));
  });
}

// Locates each first receipt of a batch (its answer in out[i] when it cannot be) and hands the
// located ones to `fn`, whose Status becomes the answer: ack and release plan their batches so.
void EngineImpl::ForEachDeliveryLocked(QueueState* q, const std::vector<Result<Receipt>>& parsed,
                                       const std::vector<size_t>& first, std::vector<ReceiptTarget>& targets,
                                       std::vector<Status>& out, const DeliveryFn& fn) {
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (first[i] != i) continue;
    if (!parsed[i].ok()) {
      out[i] = parsed[i].status();
      continue;
    }
    JobRecord record;
    bool have_record;
    out[i] = LocateReceiptLocked(q, *parsed[i], &targets[i], &record, &have_record);
    if (out[i].ok()) out[i] = fn(i, targets[i], record);
  }
}

namespace {

// An ack's writes: the job's rows go, and its key is released (kept_keys.h). The key is the
// lease's, or the record's when the lease ran out.
void PutAck(Storage& storage, std::string_view queue, const ReceiptTarget& t, const Lease* lease,
            const JobRecord& record, int64_t now_ms, WriteBatch& batch) {
  const std::string& key = lease ? lease->idem_key : record.key;
  const bool key_indexed = lease ? lease->key_indexed : record.key_indexed;
  const int64_t key_ttl_ms = lease ? lease->key_ttl_ms : record.key_ttl_ms;
  if (!t.in_due) batch.Delete(Cf::kJobs, t.id.Raw());
  batch.Delete(Cf::kDue, DueIndexKey(queue, t.key));
  if (key_indexed) ReleaseKey(storage, queue, t.id, key, t.key.due_ms, key_ttl_ms, now_ms, batch);
}

// A release's write: the delivery goes back to ready where it stood (its due key), one attempt
// less, with no lease and no token; an inline record is rewritten with its entry.
Status PutRelease(Storage& storage, std::string_view queue, const ReceiptTarget& t, JobRecord& record,
                  WriteBatch& batch) {
  if (!t.leased) return errors::ReleasedTooLate(t.id.ToString());  // its lease ran out: that attempt counted
  DueRecord back{t.key.due_ms, t.attempt - 1, {}, 0};
  back.priority = t.lane.priority;
  back.group = t.lane.group;
  std::string inline_record;  // back.record views it: it lives until the entry is encoded
  if (t.in_due) {
    bool still_inline = false;
    DELAYQ_RETURN_IF_ERROR(ReadRecord(storage, queue, t.id, &t.key, &record, &still_inline, &inline_record));
    if (still_inline) back.record = inline_record;
  }
  batch.Put(Cf::kDue, DueIndexKey(queue, t.key), EncodeDueRecord(back));
  return Status::Ok();
}

}  // namespace

// The locked part of an ack batch: `out` gets each first receipt's answer; the caller finishes
// `op`, then calls AnswerAckBatch with the durability's outcome.
void EngineImpl::AckBatchLocked(Op& op, std::string_view queue, std::span<const AckRequest> requests,
                                const std::vector<Result<Receipt>>& parsed, const std::vector<size_t>& first,
                                std::vector<Status>& out) {
  QueueState* q = op.status().ok() ? FindQueueLocked(queue) : nullptr;
  if (!op.status().ok() || !q) {
    std::fill(out.begin(), out.end(), op.status().ok() ? UnknownQueue(queue) : op.status());
    return;
  }
  std::vector<ReceiptTarget> targets(requests.size());
  std::vector<bool> kept(requests.size());       // core/mutant.h's ack-keeps-job
  std::vector<bool> completed(requests.size());  // kept completed: keep_completed_ms, or a wait names it
  const bool keep_completed = ConfigOf(q).keep_completed_ms > 0;
  const int64_t now_ms = op.now().wall_ms();
  auto batch = storage_->NewBatch();
  ForEachDeliveryLocked(q, parsed, first, targets, out, [&](size_t i, const ReceiptTarget& t, JobRecord& record) {
    if (requests[i].result) DELAYQ_RETURN_IF_ERROR(ValidateResult(*requests[i].result));
    if (MutantStrikes("ack-keeps-job", 10)) {
      kept[i] = true;
      return Status::Ok();
    }
    PutAck(*storage_, queue, t, t.leased ? &leases_.at(t.id) : nullptr, record, now_ms, *batch);
    // (The batch is not written yet: the record is still where PutAck deletes it from.)
    completed[i] = keep_completed || (outcomes_.any() && outcomes_.Waited(queue, t.id.ToString()));
    if (completed[i]) return PutCompletedLocked(q, t, record, requests[i].result, now_ms, *batch);
    return Status::Ok();
  });
  if (batch->Count() == 0) return;
  if (Status s = op.Write(*batch); !s.ok()) {
    for (auto& st : out) {
      if (st.ok()) st = s;
    }
    return;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (first[i] != i || !out[i].ok() || kept[i]) continue;
    const ReceiptTarget& t = targets[i];
    if (t.leased) {
      leases_.Remove(t.id);
    } else {
      q->ready.erase(t.key);
      --ready_entries_;
    }
    --q->live;
    ++q->counters.acked;
    if (completed[i]) NoteCompletedLocked(q, t.id, now_ms);
  }
  // Leases ended: reserves held back by max_reserved or group_max_reserved may go on.
  if (HasLeaseCaps(ConfigOf(q))) ServeWaitersLocked(q, op.now(), op.deferred());
}

std::vector<Status> EngineImpl::ReleaseBatch(std::string_view queue, std::span<const std::string> receipts) {
  std::vector<Result<Receipt>> parsed;
  std::vector<size_t> first;
  std::vector<Status> out;
  if (!OpenReceipts(*signer_, queue, receipts, &parsed, &first, &out)) return out;
  Op op(*this, Op::kWrites);
  QueueState* q = op.status().ok() ? FindQueueLocked(queue) : nullptr;
  if (!op.status().ok() || !q) {
    std::fill(out.begin(), out.end(), op.status().ok() ? UnknownQueue(queue) : op.status());
    return out;
  }
  std::vector<ReceiptTarget> targets(receipts.size());
  auto batch = storage_->NewBatch();
  ForEachDeliveryLocked(q, parsed, first, targets, out, [&](size_t, const ReceiptTarget& t, JobRecord& record) {
    return PutRelease(*storage_, queue, t, record, *batch);
  });
  if (batch->Count() > 0) {
    const Status s = op.Write(*batch);
    for (size_t i = 0; i < receipts.size(); ++i) {
      if (first[i] != i || !out[i].ok()) continue;
      if (!s.ok()) {
        out[i] = s;
        continue;
      }
      const ReceiptTarget& t = targets[i];
      leases_.Remove(t.id);
      q->ready.emplace(t.key, ReadyInfo{t.attempt - 1, {}, /*redelivery=*/true, t.lane});
      ++ready_entries_;
      --q->counters.delivered;
    }
    if (s.ok()) ServeWaitersLocked(q, op.now(), op.deferred());
  }
  AnswerAckBatch(first, op.Finish(), out);
  return out;
}

Result<NackResult> EngineImpl::Nack(std::string_view queue, const NackRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  auto receipt = signer_->Open(queue, request.receipt);  // answered after the queue's existence
  Op op(*this, Op::kWrites);
  auto result = NackLocked(op, queue, request, receipt);
  if (!result.ok()) return result;
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return result;
}

void EngineImpl::NackAsync(std::string_view queue, const NackRequest& request, NackCallback done) {
  if (Status valid = ValidateQueueName(queue); !valid.ok()) return done(valid);
  auto receipt = signer_->Open(queue, request.receipt);
  Op op(*this, Op::kWrites);
  FinishWith(op, NackLocked(op, queue, request, receipt), std::move(done));
}

// The locked part of a nack (written, not yet durable); the caller finishes `op`.
Result<NackResult> EngineImpl::NackLocked(Op& op, std::string_view queue, const NackRequest& request,
                                          const Result<Receipt>& receipt) {
  NackResult result;
  DELAYQ_RETURN_IF_ERROR(op.status());
  const int64_t now_ms = op.now().wall_ms();
  {
    QueueState* q = FindQueueLocked(queue);
    if (!q) return UnknownQueue(queue);
    if (!receipt.ok()) return receipt.status();
    const QueueConfig& config = ConfigOf(q);
    DELAYQ_RETURN_IF_ERROR(ValidateNack(request, config));
    ReceiptTarget t;
    JobRecord record;
    bool have_record;
    DELAYQ_RETURN_IF_ERROR(LocateReceiptLocked(q, *receipt, &t, &record, &have_record));
    if (!have_record) DELAYQ_RETURN_IF_ERROR(ReadRecord(*storage_, queue, t.id, &t.key, &record));
    record.last_error = NackErrorText(request);
    auto batch = storage_->NewBatch();
    const bool dead = request.dead || t.attempt >= record.max_attempts;
    DueKey new_key;
    if (dead) {
      DeadTransitionLocked(q, t.id, &record, t.attempt, now_ms, *batch);
      result = {JobState::kDead, record.due_at_ms};
    } else {
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      int64_t delay = request.retry_in_ms.value_or(BackoffDelayMs(config.backoff, t.attempt, unit(rng_)));
      new_key = {now_ms + delay, t.id};
      record.due_at_ms = new_key.due_ms;
      // Moved: its record goes to (or stays in) `jobs`, its entry has none (keys.h).
      batch->Put(Cf::kJobs, t.id.Raw(), EncodeJobRecord(record));
      batch->Delete(Cf::kDue, DueIndexKey(queue, t.key));
      DueRecord moved{new_key.due_ms, t.attempt, {}, 0};
      moved.priority = t.lane.priority;
      moved.group = t.lane.group;
      batch->Put(Cf::kDue, DueIndexKey(queue, new_key), EncodeDueRecord(moved));
      result = {JobState::kScheduled, new_key.due_ms};
    }
    DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
    if (t.leased) {
      leases_.Remove(t.id);
    } else {
      q->ready.erase(t.key);
      --ready_entries_;
    }
    ++q->counters.nacked;
    if (dead) {
      --q->live;
      NoteDeathLocked(q, t.id, now_ms);
      if (t.leased && HasLeaseCaps(config)) ServeWaitersLocked(q, op.now(), op.deferred());
    } else {
      PlaceLocked(q, new_key, t.attempt, {}, false, op.now().wall_us, t.lane);
      ServeWaitersLocked(q, op.now(), op.deferred());
    }
  }
  return result;
}

Result<TouchResult> EngineImpl::Touch(std::string_view queue, const TouchRequest& request) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateTouch(request));
  auto receipt = signer_->Open(queue, request.receipt);  // answered after the queue's existence
  Op op(*this, Op::kWrites);
  auto result = TouchLocked(op, queue, receipt, request);
  if (!result.ok()) return result;
  DELAYQ_RETURN_IF_ERROR(op.Finish());
  return result;
}

void EngineImpl::TouchAsync(std::string_view queue, const TouchRequest& request, TouchCallback done) {
  Status valid = ValidateQueueName(queue);
  if (valid.ok()) valid = ValidateTouch(request);
  if (!valid.ok()) return done(valid);
  auto receipt = signer_->Open(queue, request.receipt);
  Op op(*this, Op::kWrites);
  FinishWith(op, TouchLocked(op, queue, receipt, request), std::move(done));
}

Result<std::string> EngineImpl::ProgressLocked(std::string_view queue, const DueKey& key) {
  std::string raw;
  DueRecord due;
  DELAYQ_RETURN_IF_ERROR(storage_->Get(Cf::kDue, DueIndexKey(queue, key), &raw));
  DELAYQ_RETURN_IF_ERROR(DecodeDueRecord(raw, &due));
  return std::string(due.progress);
}

Result<TouchResult> EngineImpl::TouchLocked(Op& op, std::string_view queue, const Result<Receipt>& receipt,
                                            const TouchRequest& request) {
  TouchResult result;
  DELAYQ_RETURN_IF_ERROR(op.status());
  {
    QueueState* q = FindQueueLocked(queue);
    if (!q) return UnknownQueue(queue);
    if (!receipt.ok()) return receipt.status();
    ReceiptTarget t;
    JobRecord record;
    bool have_record;
    DELAYQ_RETURN_IF_ERROR(LocateReceiptLocked(q, *receipt, &t, &record, &have_record));
    const int64_t lease = request.lease_ms.value_or(ConfigOf(q).lease_ms);
    const int64_t deadline = op.now().wall_ms() + lease;
    const int64_t deadline_mono_us = op.now().mono_us + lease * 1000;
    auto batch = storage_->NewBatch();
    DueRecord due{t.key.due_ms, t.attempt, t.delivery, deadline};
    due.priority = t.lane.priority;
    due.group = t.lane.group;
    std::string inline_record;  // an inline record is rewritten with its entry
    if (t.in_due) {
      bool still_inline = false;
      DELAYQ_RETURN_IF_ERROR(ReadRecord(*storage_, queue, t.id, &t.key, &record, &still_inline, &inline_record));
      if (still_inline) due.record = inline_record;
    }
    // The progress is rewritten with its entry: this touch's, else the delivery's last one (an
    // entry whose lease had run out may hold one too).
    std::string kept_progress;
    if (request.progress) {
      due.progress = *request.progress;
    } else if (const Lease* held = leases_.Find(t.id); !held || held->has_progress) {
      auto kept = ProgressLocked(queue, t.key);
      if (!kept.ok()) return kept.status();
      kept_progress = std::move(*kept);
      due.progress = kept_progress;
    }
    batch->Put(Cf::kDue, DueIndexKey(queue, t.key), EncodeDueRecord(due));
    DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
    if (t.leased) {
      leases_.Extend(t.id, deadline_mono_us, deadline);
      PokeMonoLocked(deadline_mono_us);
    } else {  // the lease had run out, but no one else has the job: take it back
      q->ready.erase(t.key);
      --ready_entries_;
      AddLeaseLocked(t.id, Lease{q, t.key, t.attempt, record.max_attempts, t.delivery, deadline, deadline_mono_us,
                                 record.key, record.key_indexed, record.key_ttl_ms, t.in_due, t.lane});
    }
    leases_.SetHasProgress(t.id, !due.progress.empty());
    result.lease_deadline_ms = deadline;
  }
  return result;
}

}  // namespace delayq
