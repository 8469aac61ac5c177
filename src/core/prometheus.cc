#include "core/prometheus.h"

#include <fmt/format.h>

namespace delayq {

PrometheusText& PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  return *this;
}

// name{k="v",...}, a label value escaped as the format wants (\\, \", \n).
void PrometheusText::Series(std::string_view name, Labels labels, std::string_view extra_label,
                            std::string_view extra_value) {
  out_ += name;
  if (labels.size() == 0 && extra_label.empty()) return;
  out_ += '{';
  bool first = true;
  auto add = [&](std::string_view k, std::string_view v) {
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    for (char c : v) {
      if (c == '\\' || c == '"') {
        out_ += '\\';
        out_ += c;
      } else if (c == '\n') {
        out_ += "\\n";
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (!extra_label.empty()) add(extra_label, extra_value);
  out_ += '}';
}

PrometheusText& PrometheusText::Sample(std::string_view name, Labels labels, int64_t value) {
  Series(name, labels);
  out_ += fmt::format(" {}\n", value);
  return *this;
}

PrometheusText& PrometheusText::Sample(std::string_view name, Labels labels, uint64_t value) {
  Series(name, labels);
  out_ += fmt::format(" {}\n", value);
  return *this;
}

PrometheusText& PrometheusText::Sample(std::string_view name, Labels labels, double value) {
  Series(name, labels);
  out_ += fmt::format(" {:.6f}\n", value);
  return *this;
}

PrometheusText& PrometheusText::Histogram(std::string_view name, Labels labels, std::span<const double> upper_bounds,
                                          std::span<const uint64_t> cumulative, uint64_t count, double sum) {
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i < upper_bounds.size() && i < cumulative.size(); ++i) {
    Series(bucket, labels, "le", fmt::format("{}", upper_bounds[i]));
    out_ += fmt::format(" {}\n", cumulative[i]);
  }
  Series(bucket, labels, "le", "+Inf");
  out_ += fmt::format(" {}\n", count);
  Sample(std::string(name) + "_sum", labels, sum);
  return Sample(std::string(name) + "_count", labels, count);
}

PrometheusText& PrometheusText::Lateness(std::string_view name, Labels labels, const LatenessSummary& s) {
  constexpr size_t kEdges = std::size(LatenessSummary::kLatenessBucketsMs);
  double bounds[kEdges];
  for (size_t i = 0; i < kEdges; ++i) bounds[i] = LatenessSummary::kLatenessBucketsMs[i] / 1000.0;
  return Histogram(name, labels, bounds, s.cumulative, s.count, s.sum_ms / 1000.0);
}

}  // namespace delayq
