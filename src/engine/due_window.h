// The scheduled jobs of one queue held in memory: a calendar queue keyed by due bucket
// (DueBucket(due_ms), about 4 s). A bucket that is not first is an unsorted vector, so an
// insert is a push_back; the first bucket is kept sorted by (due, id), so the next job to come
// due is always at hand. Buckets are loaded from and dropped to disk whole (see
// EngineImpl::RefillLocked / EvictLocked).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "engine/keys.h"

namespace delayq {

class DueWindow {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void Insert(const DueKey& key, int32_t attempt) {
    Bucket& bucket = buckets_[DueBucket(key.due_ms)];
    if (bucket.is_sorted) {  // the first bucket (sorted by Front) or one that was first
      bucket.sorted.emplace(key, attempt);
    } else {
      bucket.items.emplace_back(key, attempt);
    }
    ++size_;
  }

  // The attempt of `key` when it is in the window.
  std::optional<int32_t> Find(const DueKey& key) const {
    auto b = buckets_.find(DueBucket(key.due_ms));
    if (b == buckets_.end()) return std::nullopt;
    const Bucket& bucket = b->second;
    if (bucket.is_sorted) {
      auto it = bucket.sorted.find(key);
      return it == bucket.sorted.end() ? std::nullopt : std::optional(it->second);
    }
    for (const auto& [k, attempt] : bucket.items) {
      if (k == key) return attempt;
    }
    return std::nullopt;
  }

  bool Erase(const DueKey& key) {
    auto b = buckets_.find(DueBucket(key.due_ms));
    if (b == buckets_.end()) return false;
    Bucket& bucket = b->second;
    bool erased = false;
    if (bucket.is_sorted) {
      erased = bucket.sorted.erase(key) > 0;
    } else {
      auto it = std::find_if(bucket.items.begin(), bucket.items.end(),
                             [&](const auto& e) { return e.first == key; });
      if (it != bucket.items.end()) {
        *it = bucket.items.back();
        bucket.items.pop_back();
        erased = true;
      }
    }
    if (!erased) return false;
    --size_;
    if (bucket.Empty()) buckets_.erase(b);
    return true;
  }

  // The first job by (due, id). Requires !empty().
  const DueKey& Front() {
    Bucket& first = buckets_.begin()->second;
    first.Sort();
    return first.sorted.begin()->first;
  }

  std::pair<DueKey, int32_t> PopFront() {
    auto b = buckets_.begin();
    b->second.Sort();
    auto it = b->second.sorted.begin();
    std::pair<DueKey, int32_t> out = *it;
    b->second.sorted.erase(it);
    --size_;
    if (b->second.Empty()) buckets_.erase(b);
    return out;
  }

  int64_t FirstBucket() const { return buckets_.begin()->first; }
  int64_t LastBucket() const { return buckets_.rbegin()->first; }
  size_t BucketCount() const { return buckets_.size(); }

  // Removes the last bucket; returns how many jobs it held.
  size_t DropLastBucket() {
    auto last = std::prev(buckets_.end());
    size_t n = last->second.Size();
    buckets_.erase(last);
    size_ -= n;
    return n;
  }

  // Jobs due at or before `limit_ms`.
  int64_t CountDueBy(int64_t limit_ms) const {
    int64_t n = 0;
    const int64_t limit_bucket = DueBucket(limit_ms);
    for (const auto& [b, bucket] : buckets_) {
      if (b > limit_bucket) break;
      if (b < limit_bucket) {
        n += static_cast<int64_t>(bucket.Size());
        continue;
      }
      for (const auto& [k, a] : bucket.sorted) n += k.due_ms <= limit_ms;
      for (const auto& [k, a] : bucket.items) n += k.due_ms <= limit_ms;
    }
    return n;
  }

 private:
  struct Bucket {
    std::vector<std::pair<DueKey, int32_t>> items;  // while not first: unsorted
    std::map<DueKey, int32_t> sorted;               // once first
    bool is_sorted = false;
    void Sort() {
      if (is_sorted) return;
      for (auto& [k, a] : items) sorted.emplace(k, a);
      items.clear();
      items.shrink_to_fit();
      is_sorted = true;
    }
    size_t Size() const { return items.size() + sorted.size(); }
    bool Empty() const { return items.empty() && sorted.empty(); }
  };
  std::map<int64_t, Bucket> buckets_;
  size_t size_ = 0;
};

}  // namespace delayq
