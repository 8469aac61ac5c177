// Server-side metrics that the Queue does not know: HTTP request latency by route and
// gauges of the transport. Rendered together with the per-queue figures in Prometheus text.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/prometheus.h"
#include "delayq/job.h"

namespace delayq::http {

// What GET /v1/version and delayq_build_info say the server runs on.
struct BuildInfo {
  std::string store = "embedded";  // embedded | redis | redis-cluster
  std::string durability;          // sync | interval | none; "redis" on Redis (its own AOF settings)
};

class Metrics {
 public:
  static constexpr std::array<double, 16> kBucketsSeconds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                             0.25,   0.5,   1,      2.5,   5,    10,    30,   60};

  explicit Metrics(BuildInfo build = {});
  const BuildInfo& build() const { return build_; }
  // One answered request of route `route` (an index of Routes(), or kNoRoute).
  void Observe(size_t route, int status, double seconds);

  std::atomic<int64_t> connections{0};  // open HTTP connections
  std::atomic<int64_t> body_bytes{0};   // request body bytes held now (of --max-body-memory)
  std::atomic<int64_t> waiting{0};      // reserves waiting for a job
  std::atomic<int64_t> streams{0};      // push streams open (POST /v1/queues/{q}/stream)

  // Per-queue series are written for this many queues at most (those holding the most jobs);
  // the others are summed into queue="(other)", which no queue can be named, so a scrape stays
  // small whatever the number of queues.
  static constexpr size_t kMaxQueueSeries = 500;

  // Prometheus text for the HTTP metrics, the process, the store's health (`store_up`) and the
  // queues in `stats`.
  std::string Render(std::vector<QueueStats> stats, bool store_up) const;

 private:
  void RenderRoutes(PrometheusText& out) const;
  struct PerRoute {
    // Per bucket (not cumulative: one increment per request); +1 slot for above the last.
    std::array<std::atomic<uint64_t>, kBucketsSeconds.size() + 1> buckets{};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> sum_us{0};
    std::array<std::atomic<uint64_t>, 6> by_class{};  // 1xx..5xx, index = status / 100
  };
  std::unique_ptr<PerRoute[]> routes_;  // one per route of the table, then one for the rest
  size_t route_count_ = 0;
  BuildInfo build_;
  const int64_t started_us_ = NowUs();
  static int64_t NowUs();
};

}  // namespace delayq::http
