#include "http/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "core/prometheus.h"
#include "core/version.h"
#include "http/process.h"
#include "http/routes.h"

namespace delayq::http {

Metrics::Metrics(BuildInfo build)
    : routes_(new PerRoute[Routes().size() + 1]), route_count_(Routes().size() + 1), build_(std::move(build)) {}

int64_t Metrics::NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Metrics::Observe(size_t route, int status, double seconds) {
  PerRoute& r = routes_[std::min(route, route_count_ - 1)];
  size_t i = 0;
  while (i < kBucketsSeconds.size() && seconds > kBucketsSeconds[i]) ++i;
  r.buckets[i].fetch_add(1, std::memory_order_relaxed);
  r.count.fetch_add(1, std::memory_order_relaxed);
  r.sum_us.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
  r.by_class[std::min(5, std::max(1, status / 100))].fetch_add(1, std::memory_order_relaxed);
}

namespace {

// Keeps the kMaxQueueSeries queues holding the most jobs and sums the rest into "(other)".
void FoldQueues(std::vector<QueueStats>& stats) {
  if (stats.size() <= Metrics::kMaxQueueSeries) return;
  auto jobs = [](const QueueStats& s) { return s.scheduled + s.ready + s.reserved + s.dead; };
  std::nth_element(stats.begin(), stats.begin() + Metrics::kMaxQueueSeries - 1, stats.end(),
                   [&](const QueueStats& a, const QueueStats& b) { return jobs(a) > jobs(b); });
  QueueStats other;
  other.name = "(other)";
  for (auto it = stats.begin() + Metrics::kMaxQueueSeries - 1; it != stats.end(); ++it) {
    other.scheduled += it->scheduled;
    other.ready += it->ready;
    other.reserved += it->reserved;
    other.dead += it->dead;
    other.due_next_60s += it->due_next_60s;
    other.oldest_ready_ms = std::max(other.oldest_ready_ms, it->oldest_ready_ms);
    other.counters.enqueued += it->counters.enqueued;
    other.counters.delivered += it->counters.delivered;
    other.counters.acked += it->counters.acked;
    other.counters.nacked += it->counters.nacked;
    other.counters.redelivered += it->counters.redelivered;
    other.counters.dead += it->counters.dead;
    for (auto field : {&QueueStats::lateness, &QueueStats::limit_wait}) {
      auto& l = other.*field;
      const auto& add = (*it).*field;
      if (l.cumulative.size() < add.cumulative.size()) l.cumulative.resize(add.cumulative.size());
      for (size_t i = 0; i < add.cumulative.size(); ++i) l.cumulative[i] += add.cumulative[i];
      l.count += add.count;
      l.sum_ms += add.sum_ms;
    }
  }
  stats.resize(Metrics::kMaxQueueSeries - 1);
  std::sort(stats.begin(), stats.end(), [](const QueueStats& a, const QueueStats& b) { return a.name < b.name; });
  stats.push_back(std::move(other));
}

}  // namespace

// Latency and answers by route.
void Metrics::RenderRoutes(PrometheusText& out) const {
  out.Family("delayq_http_request_duration_seconds", "histogram", "HTTP request latency by route.");
  for (size_t r = 0; r < route_count_; ++r) {
    const PerRoute& pr = routes_[r];
    const uint64_t count = pr.count.load(std::memory_order_relaxed);
    if (count == 0) continue;
    std::array<uint64_t, kBucketsSeconds.size()> cumulative{};
    uint64_t running = 0;
    for (size_t i = 0; i < kBucketsSeconds.size(); ++i) {
      running += pr.buckets[i].load(std::memory_order_relaxed);
      cumulative[i] = running;
    }
    const std::string route = RouteName(r);
    out.Histogram("delayq_http_request_duration_seconds", {{"route", route}}, kBucketsSeconds, cumulative, count,
                  pr.sum_us.load(std::memory_order_relaxed) / 1e6);
  }
  out.Family("delayq_http_requests_total", "counter", "HTTP requests by route and status class.");
  for (size_t r = 0; r < route_count_; ++r) {
    const std::string route = RouteName(r);
    for (int c = 1; c <= 5; ++c) {
      const uint64_t n = routes_[r].by_class[c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      const std::string code = std::to_string(c) + "xx";
      out.Sample("delayq_http_requests_total", {{"route", route}, {"code", code}}, n);
    }
  }
}

std::string Metrics::Render(std::vector<QueueStats> stats, bool store_up) const {
  FoldQueues(stats);
  PrometheusText out;
  out.Reserve(4096 + stats.size() * 2048);
  out.Family("delayq_jobs", "gauge", "Jobs per queue and state.");
  for (const auto& s : stats) {
    out.Sample("delayq_jobs", {{"queue", s.name}, {"state", "scheduled"}}, s.scheduled);
    out.Sample("delayq_jobs", {{"queue", s.name}, {"state", "ready"}}, s.ready);
    out.Sample("delayq_jobs", {{"queue", s.name}, {"state", "reserved"}}, s.reserved);
    out.Sample("delayq_jobs", {{"queue", s.name}, {"state", "dead"}}, s.dead);
    out.Sample("delayq_jobs", {{"queue", s.name}, {"state", "completed"}}, s.completed);
  }
  out.Family("delayq_jobs_due_next_60s", "gauge", "Scheduled jobs due in the next 60 seconds.");
  for (const auto& s : stats) out.Sample("delayq_jobs_due_next_60s", {{"queue", s.name}}, s.due_next_60s);
  out.Family("delayq_oldest_ready_seconds", "gauge", "Age of the longest-waiting ready job.");
  for (const auto& s : stats)
    out.Sample("delayq_oldest_ready_seconds", {{"queue", s.name}}, s.oldest_ready_ms / 1000.0);
  out.Family("delayq_queue_paused", "gauge", "1 while the queue is paused.");
  for (const auto& s : stats) out.Sample("delayq_queue_paused", {{"queue", s.name}}, s.paused ? 1 : 0);
  struct Counter {
    const char* name;
    const char* help;
    uint64_t QueueCounters::*field;
  };
  for (const Counter& c : {
           Counter{"delayq_jobs_enqueued_total", "Jobs enqueued.", &QueueCounters::enqueued},
           Counter{"delayq_jobs_delivered_total", "Deliveries (reserves) of jobs.", &QueueCounters::delivered},
           Counter{"delayq_jobs_acked_total", "Jobs acknowledged.", &QueueCounters::acked},
           Counter{"delayq_jobs_nacked_total", "Deliveries ended by a nack.", &QueueCounters::nacked},
           Counter{"delayq_jobs_redelivered_total", "Leases that expired without an answer.",
                   &QueueCounters::redelivered},
           Counter{"delayq_jobs_dead_total", "Jobs moved to the dead-letter queue.", &QueueCounters::dead},
       }) {
    out.Family(c.name, "counter", c.help);
    for (const auto& s : stats) out.Sample(c.name, {{"queue", s.name}}, s.counters.*c.field);
  }
  out.Family("delayq_delivery_lateness_seconds", "histogram",
             "Delivery lateness: delivered_at - due_at of first deliveries.");
  for (const auto& s : stats) out.Lateness("delayq_delivery_lateness_seconds", {{"queue", s.name}}, s.lateness);
  out.Family("delayq_limit_wait_seconds", "histogram",
             "Time first deliveries were held back by the queue's flow control (rate_per_s, max_reserved) after "
             "they were due; not counted in the lateness. Only queues whose limits held a job back.");
  for (const auto& s : stats) {
    // Most queues have no limits: no series of zeros for them (/metrics stays within its size).
    if (s.limit_wait.count > 0) out.Lateness("delayq_limit_wait_seconds", {{"queue", s.name}}, s.limit_wait);
  }
  RenderRoutes(out);
  out.Family("delayq_http_connections", "gauge", "Open HTTP connections.");
  out.Sample("delayq_http_connections", {}, connections.load());
  out.Family("delayq_http_body_bytes", "gauge",
             "Bytes of request bodies held now, counted from Content-Length (bounded by --max-body-memory).");
  out.Sample("delayq_http_body_bytes", {}, body_bytes.load());
  out.Family("delayq_reserve_waiting", "gauge",
             "Requests waiting: reserves for a job (long polls) and waits for an outcome.");
  out.Sample("delayq_reserve_waiting", {}, waiting.load());
  out.Family("delayq_streams", "gauge", "Push delivery streams open (POST /v1/queues/{q}/stream).");
  out.Sample("delayq_streams", {}, streams.load());
  const ProcessFigures process = ReadProcess();
  WriteProcessMetrics(out, process);
  // The names of 0.1, kept for the dashboards that use them.
  out.Family("delayq_process_resident_memory_bytes", "gauge",
             "Resident memory of the server (deprecated: process_resident_memory_bytes).");
  out.Sample("delayq_process_resident_memory_bytes", {}, process.resident_bytes);
  out.Family("delayq_process_cpu_seconds_total", "counter",
             "CPU time of the server (deprecated: process_cpu_seconds_total).");
  out.Sample("delayq_process_cpu_seconds_total", {}, process.cpu_seconds);
  out.Family("delayq_build_info", "gauge", "Always 1; the labels say which delayq this is and what it runs on.");
  out.Sample("delayq_build_info",
             {{"version", std::string(Version())},
              {"commit", std::string(Commit())},
              {"store", build_.store},
              {"durability", build_.durability}},
             1);
  out.Family("delayq_store_up", "gauge",
             "1 while the store can serve requests (Redis reachable and loaded; the embedded store open).");
  out.Sample("delayq_store_up", {}, store_up ? 1 : 0);
  out.Family("delayq_uptime_seconds", "gauge", "Seconds since the server started.");
  out.Sample("delayq_uptime_seconds", {}, (NowUs() - started_us_) / 1e6);
  return out.Take();
}

}  // namespace delayq::http
