// Deliveries before enqueues, on one Redis (issue 16). Redis runs one script at a time, first come
// first served, so a promote or reserve that arrives behind queued enqueue scripts waits for all
// of them, and a delivery takes two such hops (promote, then reserve). While a delivery script of
// this process is in flight, this process holds its next enqueue scripts back (each at most
// `max_wait`, so an enqueue is slowed, never stalled): a delivery hop then waits for at most the
// one enqueue script Redis is already running. Other processes sharing the Redis are not held.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace delayq::redis {

class DeliveryFirst {
 public:
  explicit DeliveryFirst(std::chrono::microseconds max_wait) : max_wait_(max_wait) {}

  // Held around a delivery script (promote, reserve): enqueues wait while any is held.
  class Delivery {
   public:
    explicit Delivery(DeliveryFirst& gate) : gate_(gate) {
      std::lock_guard lock(gate_.mu_);
      ++gate_.in_flight_;
    }
    ~Delivery() {
      std::lock_guard lock(gate_.mu_);
      if (--gate_.in_flight_ == 0) gate_.cv_.notify_all();
    }
    Delivery(const Delivery&) = delete;
    Delivery& operator=(const Delivery&) = delete;

   private:
    DeliveryFirst& gate_;
  };

  // Called before an enqueue script: returns when no delivery is in flight, or after max_wait.
  void BeforeEnqueue() {
    std::unique_lock lock(mu_);
    if (in_flight_ == 0 || max_wait_.count() <= 0) return;
    ++held_;
    cv_.wait_for(lock, max_wait_, [this] { return in_flight_ == 0; });
  }

  // Delivery scripts of this process in flight now (for tests).
  int in_flight() const {
    std::lock_guard lock(mu_);
    return in_flight_;
  }

  // Enqueues held back so far (for tests and metrics).
  uint64_t held() const {
    std::lock_guard lock(mu_);
    return held_;
  }

 private:
  const std::chrono::microseconds max_wait_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  uint64_t held_ = 0;
};

}  // namespace delayq::redis
