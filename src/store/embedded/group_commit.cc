#include "store/embedded/group_commit.h"

#include <spdlog/spdlog.h>

namespace delayq {

Status GroupCommit::WaitDurable(uint64_t seq) {
  std::unique_lock lock(mu_);
  while (synced_ < seq) {
    if (syncing_) {
      cv_.wait(lock);
      continue;
    }
    syncing_ = true;
    lock.unlock();
    if (in_flight_.load(std::memory_order_acquire) > 0) {  // let the writers on their way join
      std::unique_lock gather(gather_mu_);
      gather_cv_.wait_for(gather, std::chrono::microseconds(kMaxGatherUs),
                          [this] { return in_flight_.load(std::memory_order_acquire) == 0; });
    }
    uint64_t target = written();  // every write up to here is in the log: one sync covers it
    Status s = storage_->SyncWal();
    syncs_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
    syncing_ = false;
    if (s.ok()) synced_ = std::max(synced_, target);
    cv_.notify_all();
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

void GroupCommit::StartInterval(int64_t interval_ms) {
  interval_thread_ = std::thread([this, interval_ms] {
    std::unique_lock lock(mu_);
    bool failing = false;  // logs a failure once, not every interval
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return stop_; });
      if (stop_) break;
      if (synced_ < written() && !syncing_) {
        lock.unlock();
        Status s = WaitDurable(written());
        if (!s.ok() && !failing) spdlog::error("interval sync failed: {}", s.ToString());
        if (s.ok() && failing) spdlog::info("interval syncs work again");
        failing = !s.ok();
        lock.lock();
      }
    }
  });
}

void GroupCommit::StopInterval() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (interval_thread_.joinable()) interval_thread_.join();
}

}  // namespace delayq
