// A reserve planned under the engine's lock (engine_delivery.cc): the jobs it takes, the batch
// that records their deliveries, and the answer, made before anything in memory changes; applied
// only once the batch is written (ApplyReserveLocked). The twin of EnqueuePlan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/delivery_token.h"
#include "delayq/queue.h"
#include "store/embedded/ready_jobs.h"
#include "store/embedded/storage.h"

namespace delayq {

struct ReservePlan {
  // A ready job taken: where it is and what its lease will hold.
  struct Pick {
    ReadyJobs::iterator it;
    DeliveryToken delivery;
    int32_t max_attempts;
    bool key_indexed;
    int64_t key_ttl_ms;
    bool in_due;
  };
  int32_t max = 0;          // jobs at most (what was asked, within flow control's allowance)
  int64_t max_bytes = 0;    // the answer's records at most (the first job always comes)
  int64_t deadline_ms = 0;  // the leases' deadline, on both clocks
  int64_t deadline_mono_us = 0;
  int64_t limited_since_us = 0;  // since when a limit held the queue's jobs back (lateness)
  std::unique_ptr<WriteBatch> batch;
  int64_t bytes = 0;
  std::vector<Delivery> out;  // the answer, one per pick
  std::vector<Pick> picks;
  std::vector<ReadyJobs::iterator> broken;  // ready entries whose record is gone (a bug): dropped
  // Per group served (ready order): since when its cap held it back, before this reserve.
  std::map<std::string, int64_t, std::less<>> group_since;
  // Per group, the jobs this reserve takes (ready order, for group_max_reserved).
  std::map<std::string, int64_t, std::less<>> taking;

  int32_t count() const { return static_cast<int32_t>(out.size() + broken.size()); }
};

}  // namespace delayq
