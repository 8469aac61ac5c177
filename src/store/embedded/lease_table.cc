#include "store/embedded/lease_table.h"

#include <cassert>

#include "store/embedded/queue_state.h"

namespace delayq {

void LeaseTable::Add(const Ulid& id, Lease lease) {
  assert(!leases_.contains(id) && "a job has at most one live lease");
  deadlines_.Add(lease.deadline_mono_us, id);
  lease.queue->leases.Add(lease.key, lease.lane.group);
  leases_.insert_or_assign(id, std::move(lease));
}

void LeaseTable::Remove(const Ulid& id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  const Lease& lease = it->second;
  deadlines_.Erase(lease.deadline_mono_us, id);
  lease.queue->leases.Remove(lease.key, lease.lane.group);
  assert(lease.queue->leases.total() >= 0);
  leases_.erase(it);
}

const Lease* LeaseTable::Find(const Ulid& id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : &it->second;
}

void LeaseTable::Extend(const Ulid& id, int64_t deadline_mono_us, std::optional<int64_t> deadline_ms) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  deadlines_.Erase(it->second.deadline_mono_us, id);
  it->second.deadline_mono_us = deadline_mono_us;
  if (deadline_ms) it->second.deadline_ms = *deadline_ms;
  deadlines_.Add(deadline_mono_us, id);
}

void LeaseTable::DropQueue(const QueueState* q) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.queue != q) {
      ++it;
      continue;
    }
    deadlines_.Erase(it->second.deadline_mono_us, it->first);
    it = leases_.erase(it);
  }
}

void LeaseTable::clear() {
  leases_.clear();
  deadlines_.clear();
}

}  // namespace delayq
