#include "store/embedded/group_commit.h"

#include <spdlog/spdlog.h>

#include "core/mutant.h"

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

void GroupCommit::WhenDurable(uint64_t seq, std::function<void(Status)> done) {
  if (Mutant("answer-before-fsync")) {  // core/mutant.h: answered now, synced later
    done(Status::Ok());
    done = [](Status) {};
  }
  {
    std::lock_guard lock(mu_);
    if (synced_ < seq && !stop_) {
      pending_.push_back({seq, std::move(done)});
      if (!syncer_.joinable()) syncer_ = std::thread([this] { SyncerLoop(); });
      syncer_cv_.notify_one();
      return;
    }
    if (synced_ >= seq) seq = 0;
  }
  done(seq == 0 ? Status::Ok() : WaitDurable(seq));  // stopping: this caller syncs itself
}

void GroupCommit::SyncerLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    syncer_cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, and nothing is left to answer
    uint64_t want = 0;
    for (const Pending& p : pending_) want = std::max(want, p.seq);
    lock.unlock();
    Status s = WaitDurable(want);  // leads or joins a group, with the waiting callers too
    std::vector<Pending> answered;
    lock.lock();
    std::erase_if(pending_, [&](Pending& p) {
      if (p.seq > want) return false;  // came in during the sync: the next round
      answered.push_back(std::move(p));
      return true;
    });
    lock.unlock();
    for (Pending& p : answered) p.done(s);
    lock.lock();
  }
}

void GroupCommit::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  syncer_cv_.notify_all();
  if (interval_thread_.joinable()) interval_thread_.join();
  if (syncer_.joinable()) syncer_.join();
}

}  // namespace delayq
