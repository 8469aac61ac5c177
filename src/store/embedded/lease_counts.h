// One queue's leased jobs: counted for its caps (max_reserved, group_max_reserved) and kept by
// due key for listing. The LeaseTable keeps it in step with the leases.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "store/embedded/keys.h"

namespace delayq {

class LeaseCounts {
 public:
  using Groups = std::map<std::string, int64_t, std::less<>>;

  void Add(const DueKey& key, const std::string& group) {
    ++total_;
    if (!group.empty()) {
      ++groups_[group];
      ++named_;
    }
    keys_.insert(key);
  }
  void Remove(const DueKey& key, const std::string& group) {
    --total_;
    keys_.erase(key);
    if (group.empty()) return;
    auto g = groups_.find(group);
    if (--g->second == 0) groups_.erase(g);
    --named_;
  }
  int64_t total() const { return total_; }
  // Leased in `group` ("": the default group).
  int64_t InGroup(std::string_view group) const {
    if (group.empty()) return total_ - named_;
    auto it = groups_.find(group);
    return it == groups_.end() ? 0 : it->second;
  }
  bool any_named() const { return named_ > 0; }
  const Groups& named_groups() const { return groups_; }
  const std::set<DueKey>& keys() const { return keys_; }
  void clear() { *this = LeaseCounts{}; }

 private:
  std::set<DueKey> keys_;
  int64_t total_ = 0;
  int64_t named_ = 0;  // in named groups
  Groups groups_;      // named group -> leased
};

}  // namespace delayq
