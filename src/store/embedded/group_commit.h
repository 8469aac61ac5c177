// Group commit: callers that need their writes durable wait here, and whichever arrives first
// while no sync is running becomes the leader and syncs the log for everyone written so far;
// the rest wait for it (and one of them leads the next sync if theirs came later). Under load
// one fsync covers many callers. In interval mode a thread syncs at most every interval.
//
// A leader first waits (at most kMaxGatherUs) for writers already in flight — callers between
// Enter() and their write — because otherwise the first caller back from the last sync starts
// the next one alone, and groups alternate between tiny and large.
//
// WhenDurable is the same promise without a waiting thread: the callback is queued, and one
// syncer thread (started on first use) takes part in the groups above for every queued callback
// at once, then runs the callbacks whose writes the sync covered. So requests from any number of
// connections share one fsync, and no server thread is parked per request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "delayq/status.h"
#include "store/embedded/storage.h"

namespace delayq {

class GroupCommit {
 public:
  explicit GroupCommit(Storage* storage) : storage_(storage) {}
  ~GroupCommit() { Stop(); }

  // Records that writes up to sequence number `seq` have been applied (unsynced). Sequence
  // numbers increase with every write; callers serialize this with their writes.
  void Written(uint64_t seq) { written_.store(seq, std::memory_order_release); }

  // A caller that will write and then WaitDurable: between Enter and Leave it is in flight.
  void Enter() { in_flight_.fetch_add(1, std::memory_order_acq_rel); }
  void Leave() {
    if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) gather_cv_.notify_all();
  }
  class InFlight {
   public:
    explicit InFlight(GroupCommit* c) : c_(c) {
      if (c_) c_->Enter();
    }
    void Done() {
      if (c_) c_->Leave();
      c_ = nullptr;
    }
    ~InFlight() { Done(); }
    InFlight(InFlight&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
    InFlight(const InFlight&) = delete;

   private:
    GroupCommit* c_;
  };
  uint64_t written() const { return written_.load(std::memory_order_acquire); }

  // Returns once every write up to `seq` is synced (ok), or the sync failed.
  Status WaitDurable(uint64_t seq);
  // Calls `done` once every write up to `seq` is synced (ok) or the sync failed: at once, on this
  // thread, when it already is; otherwise later, on the syncer thread. `done` must not block.
  void WhenDurable(uint64_t seq, std::function<void(Status)> done);

  // Syncs everything written so far.
  Status SyncAll() { return WaitDurable(written()); }

  // Starts a thread that syncs at most every `interval_ms` while there are unsynced writes.
  void StartInterval(int64_t interval_ms);
  // Ends the interval and syncer threads; callbacks still queued are answered first.
  void Stop();

  uint64_t syncs() const { return syncs_.load(); }

 private:
  Storage* storage_;
  static constexpr int64_t kMaxGatherUs = 50;
  std::atomic<uint64_t> written_{0};
  std::atomic<int> in_flight_{0};
  std::mutex gather_mu_;
  std::condition_variable gather_cv_;
  std::atomic<uint64_t> syncs_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t synced_ = 0;
  bool syncing_ = false;
  bool stop_ = false;
  std::thread interval_thread_;

  void SyncerLoop();
  struct Pending {
    uint64_t seq;
    std::function<void(Status)> done;
  };
  std::vector<Pending> pending_;  // guarded by mu_
  std::condition_variable syncer_cv_;
  std::thread syncer_;  // started by the first WhenDurable that has to wait
};

}  // namespace delayq
