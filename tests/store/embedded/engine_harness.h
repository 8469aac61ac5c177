// The embedded engine under test: a temp directory and a manual clock.
#pragma once

#include <memory>

#include "conformance/queue_conformance.h"
#include "delayq/engine.h"
#include "store/embedded/engine_impl.h"
#include "store/embedded/faulty_storage.h"
#include "support/temp_dir.h"

namespace delayq::testing {

// 2026-01-01T00:00:00Z
inline constexpr int64_t kStartUs = 1'767'225'600'000'000;

class EngineHarness : public QueueHarness {
 public:
  explicit EngineHarness(Durability durability = Durability::kNone, std::function<void(EngineOptions&)> tweak = {})
      : clock_(std::make_shared<ManualClock>(kStartUs)) {
    options_.path = dir_.Sub("data");
    options_.durability = durability;
    options_.clock = clock_;
    if (tweak) tweak(options_);
    Reopen();
  }

  // Closes the engine (if open) and opens it again on the same directory, with a
  // FaultyStorage in between so tests can inject faults.
  void Reopen() {
    engine_.reset();
    auto storage = OpenRocksDbStorage({options_.path, 8 << 20, 16 << 20});
    if (!storage.ok()) throw std::runtime_error(storage.status().ToString());
    auto faulty = std::make_unique<FaultyStorage>(std::move(*storage));
    faulty_ = faulty.get();
    auto engine = OpenEngineOnStorage(options_, std::move(faulty));
    if (!engine.ok()) throw std::runtime_error(engine.status().ToString());
    engine_ = std::move(*engine);
  }
  void Close() { engine_.reset(); }
  void Restart() override { Reopen(); }

  Engine& engine() { return *engine_; }
  FaultyStorage& faults() { return *faulty_; }
  ManualClock& clock() { return *clock_; }
  std::shared_ptr<ManualClock> clock_ptr() { return clock_; }
  EngineOptions& options() { return options_; }

  Queue& queue() override { return *engine_; }
  int64_t NowMs() override { return clock_->NowMs(); }
  void Advance(int64_t ms) override { clock_->AdvanceMs(ms); }
  bool exact_time() const override { return true; }

 private:
  TempDir dir_;
  std::shared_ptr<ManualClock> clock_;
  EngineOptions options_;
  FaultyStorage* faulty_ = nullptr;
  std::unique_ptr<Engine> engine_;
};

}  // namespace delayq::testing
