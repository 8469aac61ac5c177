// Reserved jobs over all queues, and when each lease runs out (on the monotonic clock). Adding
// and removing a lease keeps its queue's LeaseCounts in step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/delivery_token.h"
#include "core/ulid.h"
#include "store/embedded/keys.h"
#include "store/embedded/ready_jobs.h"
#include "store/embedded/timeline.h"

namespace delayq {

struct QueueState;

struct Lease {
  QueueState* queue = nullptr;
  DueKey key;
  int32_t attempt = 0;
  int32_t max_attempts = 0;
  DeliveryToken delivery;
  int64_t deadline_ms = 0;       // wall clock: shown to clients and stored
  int64_t deadline_mono_us = 0;  // monotonic: when it actually runs out
  std::string idem_key;          // the job's idempotency key
  bool key_indexed = false;
  int64_t key_ttl_ms = 0;  // the job's EnqueueRequest::key_ttl_ms
  bool in_due = false;     // its record is inline in its due entry (keys.h)
  Lane lane;
  bool has_progress = false;  // its due entry holds this delivery's progress (DueRecord)
};

// Where a receipt's delivery is now (EngineImpl::LocateReceiptLocked).
struct ReceiptTarget {
  Ulid id;
  DueKey key;
  bool leased = false;  // reserved; else ready after its lease expired
  int32_t attempt = 0;
  DeliveryToken delivery;
  bool in_due = false;  // its record is inline in its due entry
  Lane lane;
};

class LeaseTable {
 public:
  // A job has at most one lease.
  void Add(const Ulid& id, Lease lease);
  void Remove(const Ulid& id);
  const Lease* Find(const Ulid& id) const;
  const Lease& at(const Ulid& id) const { return leases_.at(id); }
  bool contains(const Ulid& id) const { return leases_.contains(id); }
  size_t size() const { return leases_.size(); }
  // Moves a lease's end: to deadline_mono_us, shown as deadline_ms (nullopt: as it was).
  void Extend(const Ulid& id, int64_t deadline_mono_us, std::optional<int64_t> deadline_ms = std::nullopt);
  void SetHasProgress(const Ulid& id, bool has_progress) {
    if (auto it = leases_.find(id); it != leases_.end()) it->second.has_progress = has_progress;
  }
  // The earliest end of a lease (Clock::kNever: none), and the leases ended by mono_us.
  int64_t NextDeadline() const { return deadlines_.Next(); }
  std::vector<Ulid> EndedBy(int64_t mono_us) const { return deadlines_.DueBy(mono_us); }
  // Forgets the leases of a queue that is gone (its counts go with it).
  void DropQueue(const QueueState* q);
  void clear();

 private:
  std::unordered_map<Ulid, Lease, UlidHash> leases_;
  Timeline<Ulid> deadlines_;
};

}  // namespace delayq
