#include "delayq/worker.h"

#include <chrono>
#include <cstdio>
#include <future>

namespace delayq {

Worker::Worker(Queue& queue, std::string queue_name, Handler handler, WorkerOptions options)
    : queue_(queue), name_(std::move(queue_name)), handler_(std::move(handler)), options_(std::move(options)) {}

Worker::~Worker() { Stop(); }

void Worker::Start() {
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
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
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
      continue;
    }
    for (const Delivery& job : *jobs) {
      {
        std::lock_guard lock(mu_);
        in_flight_[slot] = job.receipt;
      }
      std::string error;
      try {
        handler_(job);
      } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "the handler threw an exception";
      } catch (...) {
        error = "the handler threw a non-standard exception";
      }
      {
        std::lock_guard lock(mu_);
        in_flight_.erase(slot);
      }
      if (error.empty()) {
        Status s = queue_.Ack(name_, job.receipt);
        if (!s.ok()) {
          Report(s);
        } else {
          std::lock_guard lock(mu_);
          ++stats_.acked;
        }
      } else {
        auto n = queue_.Nack(name_, {job.receipt, std::nullopt, error, false});
        if (!n.ok()) {
          Report(n.status());
        } else {
          std::lock_guard lock(mu_);
          ++stats_.nacked;
        }
      }
    }
  }
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
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(250, lease_ms / 3)));
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
