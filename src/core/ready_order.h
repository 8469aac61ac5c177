// The order a reserve takes ready jobs in when jobs carry a `group` and a `priority` (docs/http-api.md, Priorities and
// fair groups, issue 17 items 3 and 4). The rule, for every store:
//   1. Groups take turns. Each job taken goes to the group whose last turn is the oldest among
//      the groups with a ready job and room under `group_max_reserved`; taking it makes that
//      group's turn the newest. A group that gets its first ready job joins at the back. So a
//      tenant with 10 ready jobs waits at most one job of each other tenant, however many
//      those have ready.
//   2. Within a group, the highest effective priority first; among equal ones the earlier due
//      time, then the smaller id (creation order).
//   3. Effective priority = min(9, priority + (now - due) / aging_ms): a job gains one level for
//      every `aging_ms` it has been due, so a low priority waits, but not forever (aging_ms 0:
//      no aging, strict priorities).
// Within a level the job due first has been due longest, so it has that level's highest
// effective priority: a pick compares the heads of at most 10 levels of one group.
//
// Not thread-safe: its owner (a queue's state) serialises calls. Memory: one ordered-set node
// per ready job, and one entry per group with a ready job.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/ulid.h"

namespace delayq {

inline constexpr int kPriorityLevels = 10;  // priorities 0..9

struct ReadyKey {
  int64_t due_ms = 0;
  Ulid id;
  auto operator<=>(const ReadyKey&) const = default;
  bool operator==(const ReadyKey&) const = default;
};

struct ReadyOrderRules {
  int64_t aging_ms = 0;  // 0: strict priorities
  // Whether a group is at its cap (group_max_reserved) and must be skipped; null: none is. The
  // owner counts each group's leases (they outlive the ready jobs this class holds).
  std::function<bool(std::string_view group)> full;
};

// The job a reserve would take next.
struct ReadyPick {
  std::string group;
  int priority = 0;  // as enqueued (not aged)
  ReadyKey key;
};

struct GroupCount {
  std::string group;
  int64_t ready = 0;
};

class ReadyOrder {
 public:
  // Adds a ready job. priority must be 0..9.
  void Add(std::string_view group, int priority, const ReadyKey& key);
  // Removes a ready job (cancelled, replaced, taken); false when it is not here.
  bool Remove(std::string_view group, int priority, const ReadyKey& key);

  // The job to take next at now_ms under `rules` (nullopt: none, or every group with ready jobs
  // is at its cap). Does not change anything: Take() it once it is delivered.
  std::optional<ReadyPick> Peek(int64_t now_ms, const ReadyOrderRules& rules) const;
  // Removes the picked job and ends its group's turn.
  void Take(const ReadyPick& pick);

  size_t size() const { return ready_; }
  bool empty() const { return ready_ == 0; }
  size_t group_count() const { return groups_.size(); }
  // The `n` groups with the most ready jobs, most first (ties: by name).
  std::vector<GroupCount> TopGroups(size_t n) const;

 private:
  struct Group {
    std::array<std::set<ReadyKey>, kPriorityLevels> levels;
    int64_t ready = 0;
    uint64_t turn = 0;  // its place in turns_
  };
  using Groups = std::map<std::string, Group, std::less<>>;

  Groups groups_;
  std::set<std::pair<uint64_t, std::string>> turns_;  // groups with ready jobs, oldest turn first
  uint64_t next_turn_ = 0;
  size_t ready_ = 0;
};

}  // namespace delayq
