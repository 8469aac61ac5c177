// Which offsets of one partition are finished and how far a commit may go: to the first offset
// still unfinished (messages finish out of order — a short remainder held in memory behind a
// cascaded one), or past the last one read when all are finished. Offsets may have gaps.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>

namespace delayq::kafka {

class OffsetTracker {
 public:
  // Offsets are added increasing.
  void Add(int64_t offset) {
    pending_.emplace_back(offset, false);
    next_ = offset + 1;
  }
  // Marks a pending offset finished (or, for an aborted transaction, unfinished again).
  void SetDone(int64_t offset, bool done) {
    auto it = std::lower_bound(pending_.begin(), pending_.end(), std::make_pair(offset, false),
                               [](const auto& a, const auto& b) { return a.first < b.first; });
    if (it != pending_.end() && it->first == offset) it->second = done;
  }
  // The offset to commit: the first unfinished one, else the one after the last read;
  // -1 before anything was read.
  int64_t CommitPoint() const {
    for (const auto& [offset, done] : pending_) {
      if (!done) return offset;
    }
    return next_;
  }
  // Forgets the finished prefix (after its commit point is final).
  void Compact() {
    while (!pending_.empty() && pending_.front().second) pending_.pop_front();
  }
  size_t pending() const { return pending_.size(); }

 private:
  std::deque<std::pair<int64_t, bool>> pending_;
  int64_t next_ = -1;
};

}  // namespace delayq::kafka
