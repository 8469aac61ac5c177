// What a store keeps of each schedule, and the few calls the schedule runner (schedule/runner.h)
// needs from a store to keep it: the embedded engine and the Redis store implement ScheduleStore;
// the runner does the rest over the Queue interface (enqueue with keys, cancel by key), so the
// rules exist once, for every store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/schedule.h"
#include "delayq/status.h"

namespace delayq {

// The runner's bookkeeping, kept with the spec and replaced only by compare-and-set.
struct ScheduleState {
  uint64_t generation = 0;  // bumped by every write; 0: not stored
  bool paused = false;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  // Every occurrence at or before this was made into a job, skipped, or run by the misfire rule.
  int64_t handled_until_ms = 0;
  // Occurrences made into jobs that were not yet due when last looked at (their jobs are
  // cancelled when the schedule is replaced, paused or deleted), ascending.
  std::vector<int64_t> pending;
  int64_t last_run_at_ms = 0;  // the latest occurrence made into a job that came due; 0: none
  // Runs a replace, pause or delete took off `pending` whose jobs it still has to cancel: kept
  // here first (in the same compare-and-set), so a server that dies before it cancelled them
  // leaves them named, and whoever writes the schedule next cancels them (runner.cc).
  std::vector<int64_t> cancelling;
};

struct StoredSchedule {
  std::string queue;
  ScheduleSpec spec;
  ScheduleState state;
};

// The stored form, shared by the stores (a byte string):
//   u8 version=1, bytes name, bytes cron, varint every_ms, bytes timezone, bytes payload,
//   u8 flags (bit 0 binary, bit 1 max_attempts set, bit 2 start_at set, bit 3 end_at set,
//   bit 4 paused), varint max_attempts, varint start_at, varint end_at, u8 misfire,
//   varint header_count, (bytes name, bytes value)*, varint created_at, varint updated_at,
//   varint handled_until, varint last_run_at, varint pending_count, varint pending*
//   version 2 (written only when a priority, a group or runs to cancel are set): then varint
//   priority, bytes group, varint cancelling_count, varint cancelling*
// The generation is kept beside the record by each store (its compare-and-set reads only that).
// Versioning follows core/record.h's rules (a newer version is refused by name).
std::string EncodeSchedule(const StoredSchedule& s);
Status DecodeSchedule(std::string_view data, StoredSchedule* s);

// A new schedule's first generation: random in [2^32, 2^48) (exact in a Lua number), so that a
// schedule made again after a delete does not take up the generations of the one before: a
// compare-and-set that read the deleted one must fail on the new one, not write the old spec
// over it.
uint64_t FirstGeneration();

class ScheduleStore {
 public:
  virtual ~ScheduleStore() = default;
  // The schedule, or nothing when the queue has none of that name.
  virtual Result<std::optional<StoredSchedule>> LoadSchedule(std::string_view queue, std::string_view name) = 0;
  // The queue's schedules by name; every queue's when `queue` is empty.
  virtual Result<std::vector<StoredSchedule>> LoadSchedules(std::string_view queue) = 0;
  // Writes `s` if its stored generation is `expected` (0: it must not exist yet); it is stored
  // with generation expected + 1 (a new one with FirstGeneration()). kConflict when the generation moved (another
  // writer: read again). A first schedule creates its queue (kResourceExhausted past the store's queue limit);
  // kResourceExhausted past ScheduleLimits::kMaxPerQueue.
  virtual Status StoreSchedule(const StoredSchedule& s, uint64_t expected) = 0;
  // Deletes it if its generation is `expected`; kConflict otherwise, kNotFound when it is gone.
  virtual Status EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) = 0;
};

}  // namespace delayq
