// An enqueue planned under the engine's lock (engine_jobs.cc): the batch to write, then what
// changes in memory, applied only once the batch is written (ApplyEnqueueLocked). The twin of
// ReservePlan.
#pragma once

#include <memory>
#include <vector>

#include "delayq/queue.h"
#include "store/embedded/keys.h"
#include "store/embedded/ready_jobs.h"
#include "store/embedded/storage.h"

namespace delayq {

struct EnqueuePlan {
  struct Placement {
    DueKey old_key;  // a replaced job's place before
    DueKey key;
    bool replaced = false;
    Lane lane;
  };
  std::unique_ptr<WriteBatch> batch;
  std::vector<Placement> placements;
  std::vector<EnqueueResult> results;
};

}  // namespace delayq
