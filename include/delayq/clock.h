// The time source of a store. Production uses SystemClock; tests inject a ManualClock and move
// time by hand, so nothing in a test waits on the wall clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace delayq {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch.
  virtual int64_t NowUs() const = 0;
  int64_t NowMs() const { return NowUs() / 1000; }
  // The longest a scheduler may block in real time before `deadline_us` could be reached.
  // A manual clock answers "a long time": it wakes sleepers through OnAdvance instead.
  virtual std::chrono::microseconds RealTimeUntil(int64_t deadline_us) const = 0;
  // Registers `wake`, called (on the advancing thread) each time the clock is moved by hand.
  // Returns an id for RemoveListener. The system clock never calls it.
  virtual uint64_t AddListener(std::function<void()> wake) = 0;
  virtual void RemoveListener(uint64_t id) = 0;
};

// The wall clock (std::chrono::system_clock).
class SystemClock final : public Clock {
 public:
  static std::shared_ptr<SystemClock> Instance();
  int64_t NowUs() const override;
  std::chrono::microseconds RealTimeUntil(int64_t deadline_us) const override;
  uint64_t AddListener(std::function<void()>) override { return 0; }
  void RemoveListener(uint64_t) override {}
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_us) : now_us_(start_us) {}
  int64_t NowUs() const override { return now_us_.load(std::memory_order_acquire); }
  std::chrono::microseconds RealTimeUntil(int64_t deadline_us) const override;
  // Moves time forward (never backward) and wakes every listener.
  void AdvanceUs(int64_t us);
  void AdvanceMs(int64_t ms) { AdvanceUs(ms * 1000); }
  void SetUs(int64_t now_us);
  uint64_t AddListener(std::function<void()> wake) override;
  void RemoveListener(uint64_t id) override;

 private:
  std::atomic<int64_t> now_us_;
  std::mutex mu_;  // guards listeners_; held while they run so removal waits for a running one
  uint64_t next_id_ = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> listeners_;
};

}  // namespace delayq
