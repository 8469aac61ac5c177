// Prometheus text exposition (format 0.0.4), written the same way by the server (/metrics) and
// the Kafka forwarder (--metrics-listen): one HELP and TYPE per family, then its samples, label
// values escaped, histograms as cumulative buckets with +Inf, _sum and _count. (No client library
// for it is packaged in Debian; the format is a few lines of text rules.)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "delayq/job.h"

namespace delayq {

class PrometheusText {
 public:
  using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

  // Starts a family; `type` is counter, gauge or histogram.
  PrometheusText& Family(std::string_view name, std::string_view type, std::string_view help);
  PrometheusText& Sample(std::string_view name, Labels labels, int64_t value);
  PrometheusText& Sample(std::string_view name, Labels labels, uint64_t value);
  PrometheusText& Sample(std::string_view name, Labels labels, int value) {
    return Sample(name, labels, static_cast<int64_t>(value));
  }
  PrometheusText& Sample(std::string_view name, Labels labels, double value);
  // The samples of one histogram: cumulative[i] observations <= upper_bounds[i], `count` in all
  // (the +Inf bucket), summing to `sum`.
  PrometheusText& Histogram(std::string_view name, Labels labels, std::span<const double> upper_bounds,
                            std::span<const uint64_t> cumulative, uint64_t count, double sum);
  // A lateness summary in seconds (its buckets are LatenessSummary::kLatenessBucketsMs).
  PrometheusText& Lateness(std::string_view name, Labels labels, const LatenessSummary& summary);

  std::string Take() { return std::move(out_); }
  void Reserve(size_t bytes) { out_.reserve(bytes); }

 private:
  void Series(std::string_view name, Labels labels, std::string_view extra_label = {},
              std::string_view extra_value = {});
  std::string out_;
};

}  // namespace delayq
