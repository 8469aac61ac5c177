// The forwarder's counters and gauges: written by its loop thread, read (Stats, /metrics) from
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/histogram.h"
#include "delayq/kafka/forwarder.h"
#include "delayq/kafka/levels.h"

namespace delayq::kafka {

class ForwarderMetrics {
 public:
  explicit ForwarderMetrics(const Levels& levels);

  // Per level, indexed like Levels.
  std::vector<std::atomic<uint64_t>> forwarded, cascaded, dead;
  std::vector<std::atomic<int64_t>> held;
  std::atomic<uint64_t> transactions{0}, aborted_transactions{0}, produce_errors{0}, rebalances{0};

  void RecordLateness(int64_t us);
  void RecordBatch(int64_t us);
  void SetPartitions(std::vector<ForwarderStats::Partition> partitions);

  ForwarderStats Snapshot() const;
  // Prometheus text format, metric names delayq_forward_*.
  std::string Render() const;

 private:
  std::vector<std::string> level_names_;
  mutable std::mutex mu_;  // guards the histograms and partitions_
  LatencyHistogram lateness_, batch_;
  std::vector<ForwarderStats::Partition> partitions_;
};

}  // namespace delayq::kafka
