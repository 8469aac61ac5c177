#include "core/prometheus.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

TEST(PrometheusText, FamiliesSamplesAndEscapedLabels) {
  PrometheusText out;
  out.Family("delayq_x_total", "counter", "Things.");
  out.Sample("delayq_x_total", {{"queue", "a\"b\\c\nd"}}, uint64_t{3});
  out.Sample("delayq_x_total", {}, int64_t{-1});
  out.Sample("delayq_x_seconds", {{"a", "1"}, {"b", "2"}}, 0.5);
  EXPECT_EQ(out.Take(),
            "# HELP delayq_x_total Things.\n# TYPE delayq_x_total counter\n"
            "delayq_x_total{queue=\"a\\\"b\\\\c\\nd\"} 3\n"
            "delayq_x_total -1\n"
            "delayq_x_seconds{a=\"1\",b=\"2\"} 0.500000\n");
}

TEST(PrometheusText, HistogramsAreCumulativeWithInfSumAndCount) {
  PrometheusText out;
  const double bounds[] = {0.001, 0.5};
  const uint64_t cumulative[] = {2, 5};
  out.Histogram("h", {{"route", "GET /"}}, bounds, cumulative, 7, 1.25);
  EXPECT_EQ(out.Take(),
            "h_bucket{route=\"GET /\",le=\"0.001\"} 2\n"
            "h_bucket{route=\"GET /\",le=\"0.5\"} 5\n"
            "h_bucket{route=\"GET /\",le=\"+Inf\"} 7\n"
            "h_sum{route=\"GET /\"} 1.250000\n"
            "h_count{route=\"GET /\"} 7\n");
}

}  // namespace
}  // namespace delayq
