// Moments at which the scheduler has work, each tied to what it is for: a lease that runs out,
// a waiting reserve that times out, a queue's next token or its next dead-letter sweep.
//
// Timeline<K> orders (moment, key) pairs; its owner keeps each key's moment (a lease knows its
// deadline), so it costs one set node per entry on the reserve path. KeyedTimeline<K> also
// remembers each key's moment, for owners that have nowhere to keep it (a queue's sweep).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "delayq/clock.h"

namespace delayq {

template <typename K>
class Timeline {
 public:
  void Add(int64_t at, const K& key) { order_.emplace(at, key); }
  void Erase(int64_t at, const K& key) { order_.erase({at, key}); }
  // The earliest moment (Clock::kNever: none).
  int64_t Next() const { return order_.empty() ? Clock::kNever : order_.begin()->first; }
  // The keys due by `at`, earliest first; they stay until erased.
  std::vector<K> DueBy(int64_t at) const {
    std::vector<K> due;
    for (auto it = order_.begin(); it != order_.end() && it->first <= at; ++it) due.push_back(it->second);
    return due;
  }
  // The earliest key (the timeline is not empty).
  const K& First() const { return order_.begin()->second; }
  // Takes out the earliest key due by `at`.
  std::optional<K> PopDue(int64_t at) {
    if (order_.empty() || order_.begin()->first > at) return std::nullopt;
    K key = order_.begin()->second;
    order_.erase(order_.begin());
    return key;
  }
  bool empty() const { return order_.empty(); }
  size_t size() const { return order_.size(); }
  void clear() { order_.clear(); }

 private:
  std::set<std::pair<int64_t, K>> order_;
};

template <typename K, typename Hash = std::hash<K>>
class KeyedTimeline {
 public:
  // Sets the key's moment (replacing any).
  void Set(const K& key, int64_t at) {
    Erase(key);
    at_.emplace(key, at);
    order_.Add(at, key);
  }
  // Sets it only when earlier than the key's moment, or the key has none; true when it did.
  bool SetEarlier(const K& key, int64_t at) {
    if (At(key) <= at) return false;
    Set(key, at);
    return true;
  }
  void Erase(const K& key) {
    auto it = at_.find(key);
    if (it == at_.end()) return;
    order_.Erase(it->second, key);
    at_.erase(it);
  }
  // The key's moment (Clock::kNever: none).
  int64_t At(const K& key) const {
    auto it = at_.find(key);
    return it == at_.end() ? Clock::kNever : it->second;
  }
  int64_t Next() const { return order_.Next(); }
  const K& First() const { return order_.First(); }
  std::optional<K> PopDue(int64_t at) {
    std::optional<K> key = order_.PopDue(at);
    if (key) at_.erase(*key);
    return key;
  }
  bool empty() const { return at_.empty(); }
  size_t size() const { return at_.size(); }
  void clear() {
    at_.clear();
    order_.clear();
  }

 private:
  std::unordered_map<K, int64_t, Hash> at_;
  Timeline<K> order_;
};

}  // namespace delayq
