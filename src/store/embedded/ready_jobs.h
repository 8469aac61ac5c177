// A queue's ready jobs in the embedded engine: by (due, id) for lookups and listings, and, while
// one of them has a priority or a group, also in a ReadyOrder (core/ready_order.h), the order a
// reserve takes them in. A queue whose jobs have neither (the common case) keeps the one map, and
// its reserves take jobs in due order, which is what ReadyOrder's rule gives for them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/delivery_token.h"
#include "core/ready_order.h"
#include "store/embedded/due_window.h"
#include "store/embedded/keys.h"

namespace delayq {

// A job's place among ready jobs beside its due time (EnqueueRequest::priority and group).
struct Lane {
  int32_t priority = 0;
  std::string group;
  bool plain() const { return priority == 0 && group.empty(); }
};

inline uint8_t LaneByte(int32_t priority, std::string_view group) {
  return static_cast<uint8_t>(static_cast<uint8_t>(priority) | (group.empty() ? 0 : kLaneHasGroup));
}
inline uint8_t LaneByte(const Lane& lane) { return LaneByte(lane.priority, lane.group); }

struct ReadyInfo {
  int32_t attempt = 0;
  DeliveryToken delivery;   // the last delivery (its receipt stays valid while ready)
  bool redelivery = false;  // back after a lease expired: no lateness sample
  Lane lane;
};

class ReadyJobs {
 public:
  using Map = std::map<DueKey, ReadyInfo>;
  using iterator = Map::iterator;
  using const_iterator = Map::const_iterator;

  bool empty() const { return map_.empty(); }
  size_t size() const { return map_.size(); }
  iterator begin() { return map_.begin(); }
  iterator end() { return map_.end(); }
  const_iterator begin() const { return map_.begin(); }
  const_iterator end() const { return map_.end(); }
  iterator find(const DueKey& key) { return map_.find(key); }
  bool contains(const DueKey& key) const { return map_.contains(key); }
  const Map& map() const { return map_; }

  void emplace(const DueKey& key, ReadyInfo info) {
    const bool laned = !info.lane.plain();
    if (laned && laned_++ == 0) {  // the first: the order starts with the plain jobs there are
      for (const auto& [k, i] : map_) order_.Add("", 0, Ready(k));
    }
    if (laned_ > 0) order_.Add(info.lane.group, info.lane.priority, Ready(key));
    map_.emplace(key, std::move(info));
  }

  void erase(iterator it) {
    if (laned_ > 0) order_.Remove(it->second.lane.group, it->second.lane.priority, Ready(it->first));
    Forget(it);
  }
  size_t erase(const DueKey& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return 0;
    erase(it);
    return 1;
  }
  void clear() {
    map_.clear();
    order_ = ReadyOrder{};
    laned_ = 0;
  }

  // Whether a reserve follows ReadyOrder (some ready job has a priority or a group) rather than
  // due order.
  bool ordered() const { return laned_ > 0; }
  std::optional<ReadyPick> Peek(int64_t now_ms, const ReadyOrderRules& rules) const {
    return order_.Peek(now_ms, rules);
  }
  // Takes the picked job out of the order (its group's turn ends) and returns its entry, which
  // the caller then erases with EraseTaken or puts back with Restore.
  iterator Take(const ReadyPick& pick) {
    order_.Take(pick);
    return map_.find(DueKey{pick.key.due_ms, pick.key.id});
  }
  void Restore(iterator it) { order_.Add(it->second.lane.group, it->second.lane.priority, Ready(it->first)); }
  void EraseTaken(iterator it) { Forget(it); }
  // Erases the entry (`taken`: one Take gave, else one still in the order) and hands back its
  // info. The info leaves only after the entry is counted out: moved out first, a job with a group
  // and priority 0 looked plain, and the queue never went back to due order.
  ReadyInfo Extract(iterator it, bool taken) {
    if (!taken && laned_ > 0) order_.Remove(it->second.lane.group, it->second.lane.priority, Ready(it->first));
    const bool laned = !it->second.lane.plain();
    ReadyInfo info = std::move(it->second);
    map_.erase(it);
    if (laned && --laned_ == 0) order_ = ReadyOrder{};  // plain again: due order
    return info;
  }
  // Ready jobs per group, most first (empty while no ready job has a priority or a group).
  std::vector<GroupCount> TopGroups(size_t n) const {
    return laned_ > 0 ? order_.TopGroups(n) : std::vector<GroupCount>{};
  }

 private:
  static ReadyKey Ready(const DueKey& key) { return {key.due_ms, key.id}; }
  void Forget(iterator it) {
    if (!it->second.lane.plain() && --laned_ == 0) order_ = ReadyOrder{};  // plain again: due order
    map_.erase(it);
  }

  Map map_;
  ReadyOrder order_;
  size_t laned_ = 0;  // ready jobs with a priority or a group
};

}  // namespace delayq
