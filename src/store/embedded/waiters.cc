#include "store/embedded/waiters.h"

#include <algorithm>
#include <cassert>

#include "store/embedded/queue_state.h"

namespace delayq {

uint64_t Waiters::Add(QueueState* q, const ReserveRequest& request, int64_t deadline_mono_us, ReserveCallback done) {
  const uint64_t handle = next_++;
  waiters_.emplace(handle, Waiter{handle, q, request, deadline_mono_us, std::move(done)});
  deadlines_.Add(deadline_mono_us, handle);
  q->waiting.push_back(handle);
  return handle;
}

std::optional<Waiter> Waiters::Take(uint64_t handle) {
  auto it = waiters_.find(handle);
  if (it == waiters_.end()) return std::nullopt;
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  deadlines_.Erase(w.deadline_mono_us, handle);
  return w;  // its handle in the line is skipped later
}

Waiter* Waiters::First(QueueState* q) {
  while (!q->waiting.empty()) {
    auto it = waiters_.find(q->waiting.front());
    if (it != waiters_.end()) return &it->second;
    q->waiting.pop_front();
  }
  return nullptr;
}

Waiter Waiters::TakeFirst(QueueState* q) {
  assert(!q->waiting.empty() && waiters_.contains(q->waiting.front()));
  const uint64_t handle = q->waiting.front();
  q->waiting.pop_front();
  return *Take(handle);
}

std::vector<Waiter> Waiters::TimedOut(int64_t mono_us) {
  std::vector<Waiter> out;
  while (auto handle = deadlines_.PopDue(mono_us)) {
    auto it = waiters_.find(*handle);
    out.push_back(std::move(it->second));
    waiters_.erase(it);
  }
  return out;
}

std::vector<Waiter> Waiters::TakeAll() {
  std::vector<Waiter> out;
  out.reserve(waiters_.size());
  for (auto& [handle, w] : waiters_) {
    w.queue->waiting.clear();
    out.push_back(std::move(w));
  }
  waiters_.clear();
  deadlines_.clear();
  return out;
}

bool Waiters::AnyIn(const QueueState* q) const {
  return std::any_of(q->waiting.begin(), q->waiting.end(), [&](uint64_t h) { return waiters_.contains(h); });
}

void Waiters::MoveLine(QueueState* from, QueueState* to) {
  for (uint64_t h : from->waiting) {
    if (auto w = waiters_.find(h); w != waiters_.end()) {
      w->second.queue = to;
      to->waiting.push_back(h);
    }
  }
  from->waiting.clear();
}

}  // namespace delayq
