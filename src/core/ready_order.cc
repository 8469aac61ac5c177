#include "core/ready_order.h"

#include <algorithm>
#include <cstdint>

namespace delayq {
namespace {

int EffectivePriority(int priority, int64_t due_ms, int64_t now_ms, int64_t aging_ms) {
  if (aging_ms <= 0 || now_ms <= due_ms) return priority;
  int64_t age;
  if (__builtin_sub_overflow(now_ms, due_ms, &age)) age = INT64_MAX;  // the far past: aged all the way
  const int64_t gained = age / aging_ms;
  return static_cast<int>(
      std::min<int64_t>(kPriorityLevels - 1, priority + std::min<int64_t>(gained, kPriorityLevels)));
}

}  // namespace

void ReadyOrder::Add(std::string_view group, int priority, const ReadyKey& key) {
  auto g = groups_.find(group);
  if (g == groups_.end()) g = groups_.emplace(std::string(group), Group{}).first;
  if (!g->second.levels[priority].insert(key).second) return;
  if (g->second.ready++ == 0) {
    g->second.turn = next_turn_++;  // joins at the back
    turns_.emplace(g->second.turn, g->first);
  }
  ++ready_;
}

bool ReadyOrder::Remove(std::string_view group, int priority, const ReadyKey& key) {
  auto g = groups_.find(group);
  if (g == groups_.end() || g->second.levels[priority].erase(key) == 0) return false;
  --ready_;
  if (--g->second.ready == 0) {
    turns_.erase({g->second.turn, g->first});
    groups_.erase(g);
  }
  return true;
}

std::optional<ReadyPick> ReadyOrder::Peek(int64_t now_ms, const ReadyOrderRules& rules) const {
  for (const auto& [turn, name] : turns_) {
    const Group& g = groups_.find(name)->second;
    if (rules.full && rules.full(name)) continue;
    std::optional<ReadyPick> best;
    int best_effective = -1;
    for (int p = kPriorityLevels - 1; p >= 0; --p) {
      if (g.levels[p].empty()) continue;
      const ReadyKey& head = *g.levels[p].begin();
      const int effective = EffectivePriority(p, head.due_ms, now_ms, rules.aging_ms);
      if (effective > best_effective || (effective == best_effective && head < best->key)) {
        best = ReadyPick{name, p, head};
        best_effective = effective;
      }
    }
    return best;  // a group in turns_ has a ready job
  }
  return std::nullopt;
}

void ReadyOrder::Take(const ReadyPick& pick) {
  auto g = groups_.find(pick.group);
  if (g == groups_.end() || g->second.levels[pick.priority].erase(pick.key) == 0) return;
  --ready_;
  turns_.erase({g->second.turn, g->first});
  if (--g->second.ready > 0) {
    g->second.turn = next_turn_++;  // its turn is over: to the back
    turns_.emplace(g->second.turn, g->first);
  } else {
    groups_.erase(g);
  }
}

std::vector<GroupCount> ReadyOrder::TopGroups(size_t n) const {
  std::vector<GroupCount> all;
  all.reserve(groups_.size());
  for (const auto& [name, g] : groups_) all.push_back({name, g.ready});
  const size_t k = std::min(n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(),
                    [](const GroupCount& a, const GroupCount& b) {
                      return a.ready != b.ready ? a.ready > b.ready : a.group < b.group;
                    });
  all.resize(k);
  return all;
}

}  // namespace delayq
