// The scheduled jobs of one queue held in memory: a calendar queue keyed by due bucket
// (DueBucket(due_ms), about 4 s). A bucket is an unsorted vector until it is first, so an
// insert is a push_back; when it becomes first it is sorted once by (due, id) with a
// counting sort on the millisecond (O(n): ids within a bucket already arrive in ascending
// order, as enqueues and refills append them). Later inserts into it that sort after the run's
// last entry (jobs handed in in due order, the usual burst) extend the run; the others go to a
// min-heap beside it (a vector: no allocation per job, where an ordered set took one and ~15 %
// of an enqueue's engine time in the profile of docs/performance.md). Finding or erasing a job
// in the heap is a scan, as it is in an unsorted bucket. Buckets are loaded from and dropped to
// disk whole (see EngineImpl::RefillLocked / EvictLocked).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "store/embedded/keys.h"

namespace delayq {

// Each entry carries a lane byte beside its attempt: the job's priority (low 4 bits) and
// kLaneHasGroup when it has a group (EngineImpl reads the group from disk when the job comes due;
// the byte fits in the entry's padding, so plain jobs cost nothing more).
inline constexpr uint8_t kLaneHasGroup = 0x10;

class DueWindow {
 public:
  struct Popped {
    DueKey key;
    int32_t attempt;
    uint8_t lane;
  };

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void Insert(const DueKey& key, int32_t attempt, uint8_t lane = 0) {
    Bucket& bucket = buckets_[DueBucket(key.due_ms)];
    if (bucket.is_sorted) {
      if (bucket.head == bucket.items.size() || !(key < bucket.items.back().key)) {
        bucket.items.push_back({key, attempt, lane});  // still sorted
      } else {
        bucket.extra.push_back({key, attempt, lane});
        std::push_heap(bucket.extra.begin(), bucket.extra.end(), Bucket::Later);
      }
    } else {
      bucket.items.push_back({key, attempt, lane});
    }
    ++size_;
  }

  // The attempt of `key` when it is in the window.
  std::optional<int32_t> Find(const DueKey& key) const {
    auto b = buckets_.find(DueBucket(key.due_ms));
    if (b == buckets_.end()) return std::nullopt;
    const Entry* e = b->second.Locate(key);
    if (e == nullptr) e = b->second.LocateExtra(key);
    return e ? std::optional(e->attempt) : std::nullopt;
  }

  bool Erase(const DueKey& key) {
    auto b = buckets_.find(DueBucket(key.due_ms));
    if (b == buckets_.end()) return false;
    if (!b->second.Erase(key)) return false;
    --size_;
    if (b->second.Empty()) buckets_.erase(b);
    return true;
  }

  // The first job by (due, id). Requires !empty().
  const DueKey& Front() {
    Bucket& first = buckets_.begin()->second;
    first.Sort();
    return first.Min()->key;
  }

  Popped PopFront() {
    auto b = buckets_.begin();
    b->second.Sort();
    Popped out = b->second.PopMin();
    --size_;
    if (b->second.Empty()) buckets_.erase(b);
    return out;
  }

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
      for (size_t i = bucket.head; i < bucket.items.size(); ++i) {
        n += bucket.items[i].key.due_ms <= limit_ms;
      }
      for (const Entry& e : bucket.extra) n += e.key.due_ms <= limit_ms;
    }
    return n;
  }

 private:
  struct Entry {
    DueKey key;
    int32_t attempt;
    uint8_t lane;
  };
  static_assert(sizeof(Entry) == 32, "the lane byte lives in the entry's padding");

  struct Bucket {
    std::vector<Entry> items;  // unsorted; once sorted, ascending from `head`
    size_t head = 0;
    std::vector<Entry> extra;  // inserted after the sort, out of order: a min-heap (Later)
    bool is_sorted = false;

    static bool Later(const Entry& a, const Entry& b) { return b.key < a.key; }

    size_t Size() const { return items.size() - head + extra.size(); }
    bool Empty() const { return Size() == 0; }

    void Sort() {
      if (is_sorted) return;
      is_sorted = true;
      if (items.empty()) return;
      // Stable counting sort on the millisecond within the bucket, then a check (and a sort
      // where needed) of the id order within each millisecond.
      constexpr size_t kSlots = size_t{1} << kDueBucketShift;
      const int64_t base = DueBucket(items.front().key.due_ms) << kDueBucketShift;
      std::vector<uint32_t> start(kSlots + 1, 0);
      for (const Entry& e : items) ++start[static_cast<size_t>(e.key.due_ms - base) + 1];
      for (size_t i = 1; i <= kSlots; ++i) start[i] += start[i - 1];
      std::vector<Entry> out(items.size());
      for (const Entry& e : items) out[start[static_cast<size_t>(e.key.due_ms - base)]++] = e;
      items.swap(out);
      auto by_key = [](const Entry& a, const Entry& b) { return a.key < b.key; };
      for (size_t i = 0; i < items.size();) {
        size_t j = i + 1;
        while (j < items.size() && items[j].key.due_ms == items[i].key.due_ms) ++j;
        if (!std::is_sorted(items.begin() + static_cast<long>(i), items.begin() + static_cast<long>(j), by_key)) {
          std::sort(items.begin() + static_cast<long>(i), items.begin() + static_cast<long>(j), by_key);
        }
        i = j;
      }
    }

    // The smallest entry (sorted buckets only).
    const Entry* Min() const {
      const Entry* run = head < items.size() ? &items[head] : nullptr;
      if (!extra.empty() && (!run || extra.front().key < run->key)) return &extra.front();
      return run;
    }

    Popped PopMin() {
      const Entry* run = head < items.size() ? &items[head] : nullptr;
      if (!extra.empty() && (!run || extra.front().key < run->key)) {
        std::pop_heap(extra.begin(), extra.end(), Later);
        Entry out = extra.back();
        extra.pop_back();
        return {out.key, out.attempt, out.lane};
      }
      ++head;
      return {run->key, run->attempt, run->lane};
    }

    const Entry* LocateExtra(const DueKey& key) const {
      for (const Entry& e : extra) {
        if (e.key == key) return &e;
      }
      return nullptr;
    }

    // The entry of `key` in `items`, if there.
    const Entry* Locate(const DueKey& key) const {
      if (!is_sorted) {
        for (const Entry& e : items) {
          if (e.key == key) return &e;
        }
        return nullptr;
      }
      auto it = std::lower_bound(items.begin() + static_cast<long>(head), items.end(), key,
                                 [](const Entry& e, const DueKey& k) { return e.key < k; });
      return it != items.end() && it->key == key ? &*it : nullptr;
    }

    bool Erase(const DueKey& key) {
      if (const Entry* x = LocateExtra(key)) {
        extra.erase(extra.begin() + (x - extra.data()));
        std::make_heap(extra.begin(), extra.end(), Later);
        return true;
      }
      const Entry* e = Locate(key);
      if (!e) return false;
      auto it = items.begin() + (e - items.data());
      if (is_sorted) {
        items.erase(it);  // keeps the run sorted
      } else {
        *it = items.back();
        items.pop_back();
      }
      return true;
    }
  };

  std::map<int64_t, Bucket> buckets_;
  size_t size_ = 0;
};

}  // namespace delayq
