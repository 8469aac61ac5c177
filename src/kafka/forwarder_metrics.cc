#include "kafka/forwarder_metrics.h"

#include <fmt/format.h>

#include "core/prometheus.h"

namespace delayq::kafka {

ForwarderMetrics::ForwarderMetrics(const Levels& levels)
    : forwarded(levels.size()), cascaded(levels.size()), dead(levels.size()), held(levels.size()) {
  for (size_t i = 0; i < levels.size(); ++i) level_names_.push_back(levels.LevelName(i));
}

void ForwarderMetrics::RecordLateness(int64_t us) {
  std::lock_guard lock(mu_);
  lateness_.Record(us);
}

void ForwarderMetrics::RecordBatch(int64_t us) {
  std::lock_guard lock(mu_);
  batch_.Record(us);
}

void ForwarderMetrics::SetPartitions(std::vector<ForwarderStats::Partition> partitions) {
  std::lock_guard lock(mu_);
  partitions_ = std::move(partitions);
}

ForwarderStats ForwarderMetrics::Snapshot() const {
  ForwarderStats stats;
  for (size_t i = 0; i < level_names_.size(); ++i) {
    stats.levels.push_back({level_names_[i], forwarded[i].load(), cascaded[i].load(), dead[i].load(),
                            static_cast<uint64_t>(std::max<int64_t>(0, held[i].load()))});
  }
  stats.transactions = transactions.load();
  stats.aborted_transactions = aborted_transactions.load();
  stats.produce_errors = produce_errors.load();
  stats.rebalances = rebalances.load();
  std::lock_guard lock(mu_);
  stats.assigned = partitions_;
  stats.lateness = lateness_.Summary();
  stats.batch = batch_.Summary();
  return stats;
}

std::string ForwarderMetrics::Render() const {
  ForwarderStats s = Snapshot();
  PrometheusText out;
  auto per_level = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    out.Family(name, type, help);
    for (const auto& level : s.levels) out.Sample(name, {{"level", level.name}}, value(level));
  };
  per_level("delayq_forward_forwarded_total", "counter",
            "Messages produced to their target topic, by the level read from.",
            [](const auto& l) { return l.forwarded; });
  per_level("delayq_forward_cascaded_total", "counter", "Messages moved to a shorter level, by the level read from.",
            [](const auto& l) { return l.cascaded; });
  per_level("delayq_forward_dead_total", "counter", "Messages sent to the dead-letter topic, by the level read from.",
            [](const auto& l) { return l.dead; });
  per_level("delayq_forward_held", "gauge", "Messages read and not yet finished (waiting in memory or in flight).",
            [](const auto& l) { return l.held; });
  out.Family("delayq_forward_consumer_lag", "gauge",
             "Messages in a level partition not yet committed by this instance.");
  for (const auto& p : s.assigned) {
    out.Sample("delayq_forward_consumer_lag", {{"topic", p.topic}, {"partition", std::to_string(p.partition)}}, p.lag);
  }
  out.Family("delayq_forward_partition_paused", "gauge",
             "1 while a partition is paused because its read-ahead is full.");
  for (const auto& p : s.assigned) {
    out.Sample("delayq_forward_partition_paused", {{"topic", p.topic}, {"partition", std::to_string(p.partition)}},
               p.paused ? 1 : 0);
  }
  out.Family("delayq_forward_assigned_partitions", "gauge", "Level partitions this instance owns.");
  out.Sample("delayq_forward_assigned_partitions", {}, static_cast<uint64_t>(s.assigned.size()));
  auto counter = [&](std::string_view name, std::string_view help, uint64_t value) {
    out.Family(name, "counter", help);
    out.Sample(name, {}, value);
  };
  counter("delayq_forward_transactions_total", "Transactions committed (--exactly-once).", s.transactions);
  counter("delayq_forward_aborted_transactions_total", "Transactions aborted and retried.", s.aborted_transactions);
  counter("delayq_forward_produce_errors_total", "Produce attempts that failed (retried).", s.produce_errors);
  counter("delayq_forward_rebalances_total", "Partition assignments and revocations seen.", s.rebalances);
  out.Family("delayq_forward_lateness_seconds", "histogram",
             "Time from a message's due time to its confirmed forward.");
  out.Lateness("delayq_forward_lateness_seconds", {}, s.lateness);
  out.Family("delayq_forward_batch_seconds", "histogram",
             "Time to act on one batch of due messages (and commit its transaction).");
  out.Lateness("delayq_forward_batch_seconds", {}, s.batch);
  return out.Take();
}

}  // namespace delayq::kafka
