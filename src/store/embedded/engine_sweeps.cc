// The sweeps of the jobs a queue keeps for a while after they leave: dead jobs for
// dead_retention_ms after their death, completed jobs for keep_completed_ms after their ack. Both
// by one rule (dead_sweeps.h): a queue's sweep is planned for the moment its oldest such job runs
// out, and deletes at most kSweepPerTick jobs a tick, so that an operation that runs the tick
// never waits long behind one.
#include <spdlog/spdlog.h>

#include "store/embedded/engine_impl.h"

namespace delayq {
namespace {

constexpr size_t kSweepPerTick = 1000;
constexpr int64_t kRetryAfterErrorMs = 1000;

std::string JobKeyOf(const Ulid& id) { return std::string(id.Raw()); }
int64_t DeadRetentionMs(const QueueConfig& config) { return config.dead_retention_ms; }
std::string DeadBegin(std::string_view queue) { return QueuePrefix(queue); }

}  // namespace

const EngineImpl::KeptSet EngineImpl::kDeadSet = {
    "dead jobs past their retention (dead_retention_ms)",
    &EngineImpl::dead_sweeps_,
    &QueueState::dead,
    &QueueState::dead_floor_ms,
    DeadRetentionMs,
    Cf::kDead,
    DeadBegin,
    QueuePrefixEnd,
    0,
    JobKeyOf,
};

const EngineImpl::KeptSet EngineImpl::kCompletedSet = {
    "completed jobs past keep_completed_ms (or, with 0, those kept for a wait: Limits::kOutcomeHoldMs)",
    &EngineImpl::completed_sweeps_,
    &QueueState::completed,
    &QueueState::completed_floor_ms,
    CompletedSweepAfterMs,
    Cf::kMeta,
    DonePrefix,
    DonePrefixEnd,
    DonePrefix("").size(),
    CompletedJobKey,
};

// Plans the queue's next sweep of `set` (or drops it: none kept), waking the scheduler when that
// is earlier than it planned.
void EngineImpl::PlanSweepLocked(const KeptSet& set, QueueState* q) {
  DeadSweeps& sweeps = this->*set.sweeps;
  sweeps.Plan(q, q->*set.count, q->*set.floor_ms, set.keep_ms(ConfigOf(q)));
  if (q->*set.count > 0 && q->*set.floor_ms != Clock::kNever) PokeWallLocked(sweeps.At(q) * 1000);
}

void EngineImpl::SweepLocked(const KeptSet& set, int64_t now_ms) {
  DeadSweeps& sweeps = this->*set.sweeps;
  size_t budget = kSweepPerTick;
  std::optional<QueueState*> due;
  while (budget > 0 && (due = sweeps.Due(now_ms))) {
    QueueState* q = *due;
    const int64_t cutoff = now_ms - set.keep_ms(ConfigOf(q));  // at or before: deleted
    auto cursor = storage_->Scan(set.cf, set.begin(q->name), set.end(q->name));
    auto batch = storage_->NewBatch();
    int64_t n = 0;
    int64_t floor = Clock::kNever;
    for (; cursor->Valid(); cursor->Next()) {
      std::string_view name;
      int64_t at;
      Ulid id;
      if (!ParseTimeIdKey(cursor->key().substr(set.skip), &name, &at, &id)) continue;
      if (at > cutoff || static_cast<size_t>(n) == budget) {
        floor = at;
        break;
      }
      batch->Delete(Cf::kJobs, set.record_key(id));
      batch->Delete(set.cf, cursor->key());
      ++n;
    }
    if (n > 0) {
      uint64_t seq;
      if (Status s = WriteLocked(*batch, &seq); !s.ok()) {
        spdlog::error("queue {}: deleting {} failed (retried in a second): {}", q->name, set.what, s.ToString());
        sweeps.Retry(q, now_ms + kRetryAfterErrorMs);
        return;
      }
      q->*set.count = std::max<int64_t>(0, q->*set.count - n);
      budget -= static_cast<size_t>(n);
      spdlog::debug("queue {}: deleted {} {}", q->name, n, set.what);
    }
    q->*set.floor_ms = floor;
    PlanSweepLocked(set, q);
  }
}

}  // namespace delayq
