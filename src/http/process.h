// The process's figures under Prometheus' standard names (process_resident_memory_bytes,
// process_cpu_seconds_total, ...), read from /proc/self as the official client libraries do, so
// that stock dashboards and alerts work on delayq.
#pragma once

#include <cstdint>

#include "core/prometheus.h"

namespace delayq::http {

struct ProcessFigures {
  int64_t resident_bytes = 0;
  int64_t virtual_bytes = 0;
  double cpu_seconds = 0;
  int64_t open_fds = 0;
  int64_t max_fds = 0;
  double start_time_seconds = 0;  // since the Unix epoch
};

// What /proc/self says now (a figure it cannot give stays 0).
ProcessFigures ReadProcess();
// The standard process_* families.
void WriteProcessMetrics(PrometheusText& out, const ProcessFigures& p);

}  // namespace delayq::http
