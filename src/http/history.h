// Recent history of every queue's stats, for the dashboard's charts: a sample every
// `interval`, the last `keep` of them (default 10 s x 90 = 15 minutes). Served at
// GET /v1/history. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "delayq/job.h"

namespace delayq::http {

struct HistorySample {
  int64_t t_ms = 0;
  int64_t scheduled = 0, ready = 0, reserved = 0, dead = 0;
  uint64_t enqueued = 0, delivered = 0, acked = 0;
  double lateness_p99_ms = 0;
};

class History {
 public:
  explicit History(int64_t interval_ms = 10'000, size_t keep = 90) : interval_ms_(interval_ms), keep_(keep) {}

  void Add(int64_t now_ms, const std::vector<QueueStats>& stats);
  // JSON: {"interval_ms": N, "queues": {"name": [[t, scheduled, ready, reserved, dead,
  // enqueued, delivered, acked, lateness_p99_ms], ...]}} for `queues` (all when empty).
  std::string Json(const std::vector<std::string>& queues) const;
  int64_t interval_ms() const { return interval_ms_; }

 private:
  const int64_t interval_ms_;
  const size_t keep_;
  mutable std::mutex mu_;
  std::map<std::string, std::deque<HistorySample>, std::less<>> samples_;
};

}  // namespace delayq::http
