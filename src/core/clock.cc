#include "delayq/clock.h"

#include <algorithm>

namespace delayq {

std::shared_ptr<SystemClock> SystemClock::Instance() {
  static auto clock = std::make_shared<SystemClock>();
  return clock;
}

int64_t SystemClock::NowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::chrono::microseconds SystemClock::RealTimeUntil(int64_t deadline_us) const {
  return std::chrono::microseconds(std::max<int64_t>(0, deadline_us - NowUs()));
}

std::chrono::microseconds ManualClock::RealTimeUntil(int64_t deadline_us) const {
  if (deadline_us <= NowUs()) return std::chrono::microseconds(0);
  return std::chrono::hours(1);  // woken by AdvanceUs through the listeners
}

void ManualClock::AdvanceUs(int64_t us) {
  if (us < 0) us = 0;
  std::lock_guard lock(mu_);
  now_us_.fetch_add(us, std::memory_order_acq_rel);
  for (auto& [id, wake] : listeners_) wake();
}

void ManualClock::SetUs(int64_t now_us) {
  std::lock_guard lock(mu_);
  if (now_us > now_us_.load()) now_us_.store(now_us, std::memory_order_release);
  for (auto& [id, wake] : listeners_) wake();
}

uint64_t ManualClock::AddListener(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  listeners_.emplace_back(next_id_, std::move(wake));
  return next_id_++;
}

void ManualClock::RemoveListener(uint64_t id) {
  std::lock_guard lock(mu_);
  std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
}

}  // namespace delayq
