#include "delayq/worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>

#include "core/validate.h"
#include "delayq/client.h"

namespace delayq {
namespace {

constexpr int kMaxInFlight = 1000;  // the longest window a stream may ask for (the server's limit)
constexpr size_t kMaxAckBatch = 1000;
// The results one ack request carries at most (the server's default body limit is 16 MiB).
constexpr size_t kMaxAckBatchBytes = 8 << 20;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Worker::Worker(Queue& queue, std::string queue_name, ResultHandler handler, WorkerOptions options, int)
    : queue_(queue), name_(std::move(queue_name)), handler_(std::move(handler)), options_(std::move(options)) {}

Worker::~Worker() { Stop(); }

void Worker::Start() {
  client_ = options_.stream ? dynamic_cast<Client*>(&queue_) : nullptr;
  if (client_ != nullptr) {
    streaming_ = true;
    stream_cancel_ = std::make_unique<StreamCancel>();
    reader_ = std::thread([this] { ReadStream(); });
    acker_ = std::thread([this] { SendAcks(); });
  }
  for (int slot = 0; slot < std::max(1, options_.concurrency); ++slot) {
    threads_.emplace_back([this] { Loop(); });
  }
  keepalive_ = std::thread([this] { KeepAlive(); });
}

void Worker::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [slot, handle] : waiting_) queue_.CancelReserve(handle);
  }
  cv_.notify_all();
  inbox_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  // Every handler is settled: the acks go out before the stream ends, since ending it gives back
  // each delivery not yet acked.
  {
    std::lock_guard lock(mu_);
    handlers_done_ = true;
  }
  acks_cv_.notify_all();
  if (acker_.joinable()) acker_.join();
  if (stream_cancel_) stream_cancel_->Cancel();
  if (reader_.joinable()) reader_.join();
  cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
}

WorkerStats Worker::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Worker::Report(const Status& s) {
  {
    std::lock_guard lock(mu_);
    ++stats_.errors;
  }
  if (options_.on_error) {
    options_.on_error(s);
  } else {
    std::fprintf(stderr, "delayq worker (%s): %s\n", name_.c_str(), s.ToString().c_str());
  }
}

void Worker::Loop() {
  static std::atomic<uint64_t> next_slot{1};
  const uint64_t slot = next_slot++;
  while (!stopping_) {
    if (streaming_) {
      TakeStreamed(slot);
    } else {
      ReserveOnce(slot);
    }
  }
}

void Worker::ReserveOnce(uint64_t slot) {
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto future = promise->get_future();
  ReserveRequest request{1, options_.wait_ms, options_.lease_ms};
  uint64_t handle = queue_.ReserveAsync(
      name_, request, [promise](Result<std::vector<Delivery>> r) { promise->set_value(std::move(r)); });
  {
    std::lock_guard lock(mu_);
    if (handle != 0) waiting_[slot] = handle;
    if (stopping_ && handle != 0) queue_.CancelReserve(handle);
  }
  auto jobs = future.get();
  {
    std::lock_guard lock(mu_);
    waiting_.erase(slot);
  }
  if (!jobs.ok()) {
    Report(jobs.status());
    std::unique_lock lock(mu_);  // back off a second before asking again
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_.load(); });
    return;
  }
  for (const Delivery& job : *jobs) {
    {
      std::lock_guard lock(mu_);
      StartLocked(slot, job);
    }
    Handle(slot, job, false);
  }
}

// The job's handler runs on `slot` from now on (the keep-alive touches its lease).
void Worker::StartLocked(uint64_t slot, const Delivery& job) {
  in_flight_[slot] = job.receipt;
  running_[job.id] = slot;
}

// A slot's turn with a stream: the next delivery it read, unless its stream ended since (the
// server gave it back then) or the worker is stopping (the stream's end gives it back).
void Worker::TakeStreamed(uint64_t slot) {
  std::unique_lock lock(mu_);
  inbox_cv_.wait(lock, [this] { return stopping_ || !streaming_ || !inbox_.empty(); });
  if (stopping_ || inbox_.empty()) return;
  if (auto q = queued_.find(inbox_.front().job.id); q != queued_.end() && q->second == &inbox_.front()) {
    queued_.erase(q);
  }
  Streamed next = std::move(inbox_.front());
  inbox_.pop_front();
  if (next.generation != generation_) {  // its stream ended: given back
    unstarted_.emplace_back(next.job.receipt, next.job.lease_deadline_ms);
    return;
  }
  if (auto r = running_.find(next.job.id); r != running_.end()) {  // delivered again while queued here
    in_flight_[r->second] = next.job.receipt;
    return;
  }
  StartLocked(slot, next.job);  // in the same hold as the check: one handler per job
  lock.unlock();
  Handle(slot, next.job, true);
}

void Worker::Handle(uint64_t slot, const Delivery& job, bool batched) {
  std::string error;
  std::optional<std::string> result;
  try {
    std::string r = handler_(job);
    if (!r.empty()) result = std::move(r);
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "the handler threw an exception";
  } catch (...) {
    error = "the handler threw a non-standard exception";
  }
  // A result the store would refuse is reported, and the job acked without it: its work is done,
  // and refusing the ack would only run it again.
  if (result) {
    if (Status valid = ValidateResult(*result, "the handler's result for job " + job.id); !valid.ok()) {
      Report(valid);
      result.reset();
    }
  }
  std::string receipt;  // the newest delivery of the job
  {
    std::lock_guard lock(mu_);
    receipt = std::move(in_flight_[slot]);
    in_flight_.erase(slot);
    if (auto r = running_.find(job.id); r != running_.end() && r->second == slot) running_.erase(r);
    if (error.empty() && batched) {
      acks_.push_back({receipt, std::move(result)});
      acks_cv_.notify_one();
      return;
    }
  }
  if (error.empty()) {
    const AckRequest ack{receipt, std::move(result)};
    Status s = AckInParts(std::span(&ack, 1)).front();
    if (!s.ok()) {
      Report(s);
    } else {
      std::lock_guard lock(mu_);
      ++stats_.acked;
    }
    return;
  }
  auto n = queue_.Nack(name_, {receipt, std::nullopt, error, false});
  if (!n.ok()) {
    Report(n.status());
  } else {
    std::lock_guard lock(mu_);
    ++stats_.nacked;
  }
}

// The stream's reader: opens it, queues what comes for the slots, opens it again a second after
// it breaks; a server without streams (404) turns the slots to reserves.
void Worker::ReadStream() {
  const int slots = std::max(1, options_.concurrency);
  const int ahead = options_.prefetch < 0 ? slots : options_.prefetch;
  StreamOptions so;
  so.max_in_flight = std::clamp(slots + ahead, 1, kMaxInFlight);
  so.lease_ms = options_.lease_ms;
  so.cancel = stream_cancel_.get();
  while (!stopping_) {
    GiveBack(false);
    uint64_t generation = 0;
    {
      std::lock_guard lock(mu_);
      generation = ++generation_;
    }
    bool overfed = false;
    Status s = client_->Stream(name_, so, [&](const Delivery* d) {
      if (d == nullptr || Redelivered(*d)) return true;
      // No more unstarted deliveries than the window asked for: a server that sends past it
      // would grow the inbox without end. The stream ends (what it queued is given back).
      overfed = !QueueDelivery(generation, *d, static_cast<size_t>(so.max_in_flight));
      return !overfed;
    });
    if (overfed) {
      s = Status::Unavailable(fmt::format(
          "the server sent more than the stream's window of {} unacknowledged jobs; the stream was ended and opened "
          "again",
          so.max_in_flight));
    }
    {
      std::lock_guard lock(mu_);
      ++generation_;  // what it queued and no handler started is given back
    }
    if (stopping_) break;
    if (s.code() == Code::kNotFound) {
      streaming_ = false;
      inbox_cv_.notify_all();
      break;
    }
    Report(s.ok() ? Status::Unavailable("the server ended the stream (it is stopping)") : s);
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_.load(); });
  }
  GiveBack(true);
}

// A delivery for the slots. A newer delivery of a job still queued (its lease ran out while it
// waited) replaces the older in place: the job runs once.
bool Worker::QueueDelivery(uint64_t generation, const Delivery& d, size_t window) {
  std::lock_guard lock(mu_);
  if (auto q = queued_.find(d.id); q != queued_.end() && q->second->generation == generation) {
    q->second->job = d;
    return true;
  }
  if (inbox_.size() >= window) return false;
  inbox_.push_back({generation, d});
  queued_[d.id] = &inbox_.back();  // a deque's push_back and pop_front keep the others in place
  inbox_cv_.notify_one();
  return true;
}

// A delivery of a job whose handler runs here (the last stream broke and the server took the
// delivery back): that handler's outcome settles this delivery, the newest. True when it was one.
bool Worker::Redelivered(const Delivery& d) {
  std::lock_guard lock(mu_);
  auto r = running_.find(d.id);
  if (r == running_.end()) return false;
  in_flight_[r->second] = d.receipt;
  return true;
}

// Releases the stream deliveries no handler started: the server may still hold them leased (it
// does after it stopped or restarted). While it cannot be reached they are kept for the next try,
// as long as their leases hold; the last try (`final`) keeps nothing.
void Worker::GiveBack(bool final) {
  std::vector<std::string> batch;
  std::vector<std::pair<std::string, int64_t>> kept;
  {
    std::lock_guard lock(mu_);
    for (Streamed& s : inbox_) unstarted_.emplace_back(std::move(s.job.receipt), s.job.lease_deadline_ms);
    inbox_.clear();
    queued_.clear();
    const int64_t now = WallMs();
    std::vector<std::pair<std::string, int64_t>> later;  // past this batch: the next one's
    for (auto& [receipt, deadline] : unstarted_) {
      if (deadline != 0 && deadline <= now) continue;  // its lease is over: nothing to give back
      if (batch.size() < kMaxAckBatch) {
        batch.push_back(receipt);
        kept.emplace_back(std::move(receipt), deadline);
      } else {
        later.emplace_back(std::move(receipt), deadline);
      }
    }
    unstarted_ = std::move(later);
  }
  if (batch.empty()) return;
  const std::vector<Status> results = queue_.ReleaseBatch(name_, batch);
  const bool unreachable = !results.empty() && results.front().code() == Code::kUnavailable;
  if (!unreachable) return;
  Report(results.front());
  if (final) return;
  std::lock_guard lock(mu_);
  unstarted_.insert(unstarted_.end(), kept.begin(), kept.end());
}

// Acks what the handlers finished, a batch per ack_delay_ms at most; returns once the handlers
// are done and every ack went out.
void Worker::SendAcks() {
  const auto delay = std::chrono::milliseconds(std::max<int64_t>(0, options_.ack_delay_ms));
  std::unique_lock lock(mu_);
  while (true) {
    acks_cv_.wait(lock, [this] { return !acks_.empty() || handlers_done_; });
    if (acks_.empty()) return;
    if (!handlers_done_) acks_cv_.wait_for(lock, delay, [this] { return handlers_done_; });  // more join
    size_t n = 0, bytes = 0;  // at most kMaxAckBatch acks and kMaxAckBatchBytes of results (the first always)
    for (; n < acks_.size() && n < kMaxAckBatch; ++n) {
      bytes += acks_[n].receipt.size() + (acks_[n].result ? acks_[n].result->size() : 0);
      if (n > 0 && bytes > kMaxAckBatchBytes) break;
    }
    std::vector<AckRequest> batch(std::make_move_iterator(acks_.begin()), std::make_move_iterator(acks_.begin() + n));
    acks_.erase(acks_.begin(), acks_.begin() + static_cast<std::ptrdiff_t>(n));
    lock.unlock();
    const std::vector<Status> results = AckInParts(batch);
    uint64_t acked = 0;
    for (const Status& r : results) {
      if (r.ok()) {
        ++acked;
      } else if (r.code() != Code::kLeaseExpired && r.code() != Code::kNotFound) {
        Report(r);  // unsettled: the lease runs out and the job is delivered again
      }
    }
    lock.lock();
    stats_.acked += acked;
  }
}

// Acks `batch` in one request. One the server refuses whole as too large for its --max-body (its
// results: the worker splits batches under 8 MiB of them, a server may take less) is split in
// halves, down to the ack whose result alone is too large, which is reported and acked without it:
// one job's result never costs the others their acks.
std::vector<Status> Worker::AckInParts(std::span<const AckRequest> batch) {
  std::vector<Status> results = queue_.AckBatch(name_, batch);
  const bool refused =
      std::all_of(results.begin(), results.end(), [](const Status& s) { return s.code() == Code::kTooLarge; });
  const bool with_results = std::any_of(batch.begin(), batch.end(), [](const AckRequest& a) { return a.result; });
  if (results.empty() || !refused || !with_results) return results;
  if (batch.size() > 1) {
    const size_t half = batch.size() / 2;
    results = AckInParts(batch.first(half));
    for (Status& s : AckInParts(batch.subspan(half))) results.push_back(std::move(s));
    return results;
  }
  Report(
      Status::TooLarge(fmt::format("the server refused the ack of a job with its result ({} bytes) as too large: "
                                   "{}; the job was acked without it",
                                   batch[0].result->size(), results[0].message())));
  const AckRequest bare{batch[0].receipt, std::nullopt};
  return queue_.AckBatch(name_, std::span(&bare, 1));
}

Status Worker::Progress(const Delivery& job, std::string progress_json) {
  std::string receipt;
  {
    std::lock_guard lock(mu_);
    auto running = running_.find(job.id);
    if (running == running_.end()) {
      return Status::InvalidArgument("job " + job.id +
                                     " is not running in this worker; report progress from its handler");
    }
    receipt = in_flight_.at(running->second);  // the newest delivery of the job
  }
  return queue_.Touch(name_, TouchRequest{std::move(receipt), options_.lease_ms, std::move(progress_json)}).status();
}

// Touches the leases of the jobs whose handlers run, every third of the lease: options_.lease_ms,
// or else the queue's lease_ms, read again every round (a config change shortens the rounds).
// It used 30 s whenever options_.lease_ms was unset, so on a queue with a shorter lease a long
// handler lost its job to another consumer (WorkerTest.AHandlerLongerThanTheLeaseKeepsItsJob).
void Worker::KeepAlive() {
  auto lease_of_queue = [this]() -> int64_t {
    if (options_.lease_ms) return *options_.lease_ms;
    auto config = queue_.GetConfig(name_);
    return config.ok() ? config->lease_ms : QueueConfig{}.lease_ms;
  };
  int64_t lease_ms = lease_of_queue();
  std::unique_lock lock(mu_);
  while (true) {
    // The predicate: a Stop() that came before this wait began is seen (without it the thread
    // slept its whole period, a third of the lease, before Stop() could return).
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(250, lease_ms / 3)),
                 [this] { return stopping_ && in_flight_.empty(); });
    if (stopping_ && in_flight_.empty()) return;
    std::vector<std::string> receipts;
    for (auto& [slot, receipt] : in_flight_) receipts.push_back(receipt);
    lock.unlock();
    for (const auto& r : receipts) {
      auto t = queue_.Touch(name_, r, options_.lease_ms);
      if (!t.ok() && t.code() != Code::kNotFound) Report(t.status());
    }
    lease_ms = lease_of_queue();
    lock.lock();
  }
}

}  // namespace delayq
