// The time source of a store. Production uses SystemClock; tests inject a ManualClock and move
// time by hand, so nothing in a test waits on the wall clock.
//
// Two clocks, for two different questions:
//   NowUs()   the wall clock (microseconds since the Unix epoch). Due times are wall-clock
//             dates ("deliver at 10:00"), so they are compared with this one.
//   MonoUs()  a monotonic clock with an arbitrary origin. Durations (a reserve's wait_ms, a
//             lease, a retry timer) are measured on this one, so that a step of the wall clock
//             (NTP, a VM resumed, an operator's `date -s`) neither ends them early nor makes
//             them last an hour longer.
// A wall clock that steps forward makes the jobs due in the skipped span due at once; one that
// steps back delays scheduled jobs by the step (never early). Listeners are told of a step, so
// a scheduler asleep until a wall-clock due time can look again.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace delayq {

class Clock {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kLongestWaitUs = 3'600'000'000;  // one hour

  virtual ~Clock() = default;
  // Wall clock: microseconds since the Unix epoch.
  virtual int64_t NowUs() const = 0;
  int64_t NowMs() const { return NowUs() / 1000; }
  // Monotonic clock: microseconds since an arbitrary origin; never goes back.
  virtual int64_t MonoUs() const = 0;
  // The longest a scheduler may block in real time before the wall-clock deadline
  // `wall_deadline_us` or the monotonic deadline `mono_deadline_us` (kNever: none) could be
  // reached, at most kLongestWaitUs (a wait of kNever would overflow a condition variable's
  // clock). A manual clock answers "a long time": it wakes sleepers through listeners instead.
  virtual std::chrono::microseconds RealTimeUntil(int64_t wall_deadline_us, int64_t mono_deadline_us) const = 0;
  std::chrono::microseconds RealTimeUntil(int64_t wall_deadline_us) const {
    return RealTimeUntil(wall_deadline_us, kNever);
  }
  // Registers `wake`, called each time the clock is moved by hand (ManualClock) or the wall
  // clock steps (SystemClock). It runs on another thread and must not block. Returns an id for
  // RemoveListener, which waits for a running call to finish.
  virtual uint64_t AddListener(std::function<void()> wake) = 0;
  virtual void RemoveListener(uint64_t id) = 0;
};

// The system's clocks: std::chrono::system_clock and steady_clock.
//
// Steps of the wall clock reach listeners two ways: at once when the kernel reports them
// (a timerfd with TFD_TIMER_CANCEL_ON_SET, which fires on clock_settime/settimeofday), and
// through RealTimeUntil, which never lets a sleep towards a wall-clock deadline last longer
// than kStepCheckUs — so a step the kernel does not report (libfaketime, a hypervisor that
// moves the guest's clock) is noticed within that time.
class SystemClock final : public Clock {
 public:
  static constexpr int64_t kStepCheckUs = 1'000'000;

  SystemClock() = default;
  ~SystemClock() override;
  static std::shared_ptr<SystemClock> Instance();
  int64_t NowUs() const override;
  int64_t MonoUs() const override;
  using Clock::RealTimeUntil;
  std::chrono::microseconds RealTimeUntil(int64_t wall_deadline_us, int64_t mono_deadline_us) const override;
  uint64_t AddListener(std::function<void()> wake) override;
  void RemoveListener(uint64_t id) override;

 private:
  void WatchSteps();  // the step watcher's thread

  std::mutex mu_;  // guards listeners_; held while they run so removal waits for a running one
  uint64_t next_id_ = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_;
  std::thread watcher_;
  int stop_fd_ = -1;  // an eventfd that ends the watcher
};

// A clock that moves only when told to. Thread-safe. The wall clock and the monotonic clock
// move together (AdvanceUs), unless a test steps the wall clock alone (StepWallUs).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_us) : now_us_(start_us), mono_us_(start_us) {}
  int64_t NowUs() const override { return now_us_.load(std::memory_order_acquire); }
  int64_t MonoUs() const override { return mono_us_.load(std::memory_order_acquire); }
  using Clock::RealTimeUntil;
  std::chrono::microseconds RealTimeUntil(int64_t wall_deadline_us, int64_t mono_deadline_us) const override;
  // Moves both clocks forward (never backward) and wakes every listener.
  void AdvanceUs(int64_t us);
  void AdvanceMs(int64_t ms) { AdvanceUs(ms * 1000); }
  // Moves the wall clock to `now_us` when that is later (the monotonic clock follows).
  void SetUs(int64_t now_us);
  // Steps the wall clock by `delta_us` (either way) without moving the monotonic clock, as
  // NTP or an operator would; wakes every listener.
  void StepWallUs(int64_t delta_us);
  uint64_t AddListener(std::function<void()> wake) override;
  void RemoveListener(uint64_t id) override;

 private:
  void WakeLocked();
  std::atomic<int64_t> now_us_;
  std::atomic<int64_t> mono_us_;
  std::mutex mu_;  // guards listeners_; held while they run so removal waits for a running one
  uint64_t next_id_ = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_;
};

}  // namespace delayq
