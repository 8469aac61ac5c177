#include "delayq/clock.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace delayq {

std::shared_ptr<SystemClock> SystemClock::Instance() {
  static auto clock = std::make_shared<SystemClock>();
  return clock;
}

SystemClock::~SystemClock() {
  if (watcher_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof(one));
    watcher_.join();
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

int64_t SystemClock::NowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SystemClock::MonoUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::chrono::microseconds SystemClock::RealTimeUntil(int64_t wall_deadline_us, int64_t mono_deadline_us) const {
  // Nothing to wait for (no scheduled job, lease, waiter or dead job) used to mean a wait of
  // kNever microseconds, whose conversion to the condition variable's nanoseconds overflowed
  // (UBSan; found when the once-a-minute dead sweep stopped bounding every sleep).
  int64_t wait = kLongestWaitUs;
  if (wall_deadline_us != kNever) {
    wait = std::min(wall_deadline_us - NowUs(), kStepCheckUs);
  }
  if (mono_deadline_us != kNever) wait = std::min(wait, mono_deadline_us - MonoUs());
  return std::chrono::microseconds(std::max<int64_t>(0, wait));
}

uint64_t SystemClock::AddListener(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  if (!watcher_.joinable()) {
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (stop_fd_ >= 0) watcher_ = std::thread([this] { WatchSteps(); });
  }
  listeners_.emplace_back(next_id_, std::move(wake));
  return next_id_++;
}

void SystemClock::RemoveListener(uint64_t id) {
  std::lock_guard lock(mu_);
  std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
}

// A CLOCK_REALTIME timer armed a day ahead with TFD_TIMER_CANCEL_ON_SET: the kernel cancels it
// (read fails with ECANCELED) whenever the wall clock is set discontinuously. Without timerfd
// (a sandbox that refuses it) the watcher ends, and RealTimeUntil's cap still notices steps.
void SystemClock::WatchSteps() {
  const int tfd = ::timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
  if (tfd < 0) return;
  while (true) {
    itimerspec spec{};
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    spec.it_value.tv_sec = now.tv_sec + 86'400;
    if (::timerfd_settime(tfd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &spec, nullptr) != 0) {
      break;
    }
    pollfd fds[2] = {{tfd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) break;
    if (fds[0].revents == 0) continue;
    uint64_t expirations;
    if (::read(tfd, &expirations, sizeof(expirations)) < 0 && errno == ECANCELED) {
      std::lock_guard lock(mu_);
      for (auto& [id, wake] : listeners_) wake();
    }
  }
  ::close(tfd);
}

std::chrono::microseconds ManualClock::RealTimeUntil(int64_t wall_deadline_us, int64_t mono_deadline_us) const {
  if (wall_deadline_us <= NowUs() || mono_deadline_us <= MonoUs()) {
    return std::chrono::microseconds(0);
  }
  return std::chrono::microseconds(kLongestWaitUs);  // woken by AdvanceUs through the listeners
}

void ManualClock::AdvanceUs(int64_t us) {
  if (us < 0) us = 0;
  std::lock_guard lock(mu_);
  now_us_.fetch_add(us, std::memory_order_acq_rel);
  mono_us_.fetch_add(us, std::memory_order_acq_rel);
  WakeLocked();
}

void ManualClock::SetUs(int64_t now_us) {
  std::lock_guard lock(mu_);
  const int64_t delta = now_us - now_us_.load();
  if (delta > 0) {
    now_us_.fetch_add(delta, std::memory_order_acq_rel);
    mono_us_.fetch_add(delta, std::memory_order_acq_rel);
  }
  WakeLocked();
}

void ManualClock::StepWallUs(int64_t delta_us) {
  std::lock_guard lock(mu_);
  now_us_.fetch_add(delta_us, std::memory_order_acq_rel);
  WakeLocked();
}

void ManualClock::WakeLocked() {
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
