#include "http/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

namespace delayq::http {

const char* RouteName(Route route) {
  switch (route) {
    case Route::kEnqueue: return "POST /v1/queues/{q}/jobs";
    case Route::kGetJob: return "GET /v1/queues/{q}/jobs/{id}";
    case Route::kCancel: return "DELETE /v1/queues/{q}/jobs/{id}";
    case Route::kReschedule: return "PATCH /v1/queues/{q}/jobs/{id}";
    case Route::kReserve: return "POST /v1/queues/{q}/reserve";
    case Route::kAck: return "POST /v1/queues/{q}/ack";
    case Route::kNack: return "POST /v1/queues/{q}/nack";
    case Route::kTouch: return "POST /v1/queues/{q}/touch";
    case Route::kListQueues: return "GET /v1/queues";
    case Route::kStats: return "GET /v1/queues/{q}";
    case Route::kConfigGet: return "GET /v1/queues/{q}/config";
    case Route::kConfigPut: return "PUT /v1/queues/{q}/config";
    case Route::kDeleteQueue: return "DELETE /v1/queues/{q}";
    case Route::kPause: return "POST /v1/queues/{q}/pause";
    case Route::kResume: return "POST /v1/queues/{q}/resume";
    case Route::kDeadList: return "GET /v1/queues/{q}/dead";
    case Route::kDeadReplay: return "POST /v1/queues/{q}/dead/replay";
    case Route::kDeadPurge: return "DELETE /v1/queues/{q}/dead";
    case Route::kSchedule: return "GET /v1/queues/{q}/schedule";
    case Route::kHistory: return "GET /v1/history";
    case Route::kMetrics: return "GET /metrics";
    case Route::kHealth: return "GET /healthz";
    case Route::kReady: return "GET /readyz";
    case Route::kDashboard: return "GET /";
    case Route::kOther:
    case Route::kCount: break;
  }
  return "other";
}

int64_t Metrics::NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Metrics::Observe(Route route, int status, double seconds) {
  PerRoute& r = routes_[static_cast<size_t>(route)];
  size_t i = 0;
  while (i < kBucketsSeconds.size() && seconds > kBucketsSeconds[i]) ++i;
  r.buckets[i].fetch_add(1, std::memory_order_relaxed);
  r.count.fetch_add(1, std::memory_order_relaxed);
  r.sum_us.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
  r.by_class[std::min(5, std::max(1, status / 100))].fetch_add(1, std::memory_order_relaxed);
}

namespace {

int64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

double CpuSeconds() {
  std::ifstream in("/proc/self/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(s.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stod(f);
    if (i == 15) stime = std::stod(f);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

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
    auto& l = other.lateness;
    if (l.cumulative.size() < it->lateness.cumulative.size()) l.cumulative.resize(it->lateness.cumulative.size());
    for (size_t i = 0; i < it->lateness.cumulative.size(); ++i) l.cumulative[i] += it->lateness.cumulative[i];
    l.count += it->lateness.count;
    l.sum_ms += it->lateness.sum_ms;
  }
  stats.resize(Metrics::kMaxQueueSeries - 1);
  std::sort(stats.begin(), stats.end(), [](const QueueStats& a, const QueueStats& b) { return a.name < b.name; });
  stats.push_back(std::move(other));
}

}  // namespace

std::string Metrics::Render(std::vector<QueueStats> stats, bool store_up) const {
  FoldQueues(stats);
  std::string out;
  out.reserve(4096 + stats.size() * 2048);
  Header(out, "delayq_jobs", "gauge", "Jobs per queue and state.");
  for (const auto& s : stats) {
    out += fmt::format("delayq_jobs{{queue=\"{}\",state=\"scheduled\"}} {}\n", s.name, s.scheduled);
    out += fmt::format("delayq_jobs{{queue=\"{}\",state=\"ready\"}} {}\n", s.name, s.ready);
    out += fmt::format("delayq_jobs{{queue=\"{}\",state=\"reserved\"}} {}\n", s.name, s.reserved);
    out += fmt::format("delayq_jobs{{queue=\"{}\",state=\"dead\"}} {}\n", s.name, s.dead);
  }
  Header(out, "delayq_jobs_due_next_60s", "gauge", "Scheduled jobs due in the next 60 seconds.");
  for (const auto& s : stats) {
    out += fmt::format("delayq_jobs_due_next_60s{{queue=\"{}\"}} {}\n", s.name, s.due_next_60s);
  }
  Header(out, "delayq_oldest_ready_seconds", "gauge", "Age of the longest-waiting ready job.");
  for (const auto& s : stats) {
    out += fmt::format("delayq_oldest_ready_seconds{{queue=\"{}\"}} {:.3f}\n", s.name,
                       s.oldest_ready_ms / 1000.0);
  }
  Header(out, "delayq_queue_paused", "gauge", "1 while the queue is paused.");
  for (const auto& s : stats) {
    out += fmt::format("delayq_queue_paused{{queue=\"{}\"}} {}\n", s.name, s.paused ? 1 : 0);
  }
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
           Counter{"delayq_jobs_redelivered_total", "Leases that expired without an answer.", &QueueCounters::redelivered},
           Counter{"delayq_jobs_dead_total", "Jobs moved to the dead-letter queue.", &QueueCounters::dead},
       }) {
    Header(out, c.name, "counter", c.help);
    for (const auto& s : stats) {
      out += fmt::format("{}{{queue=\"{}\"}} {}\n", c.name, s.name, s.counters.*c.field);
    }
  }
  Header(out, "delayq_delivery_lateness_seconds", "histogram",
         "Delivery lateness: delivered_at - due_at of first deliveries.");
  for (const auto& s : stats) {
    const auto& l = s.lateness;
    for (size_t i = 0; i < l.cumulative.size(); ++i) {
      out += fmt::format("delayq_delivery_lateness_seconds_bucket{{queue=\"{}\",le=\"{}\"}} {}\n",
                         s.name, LatenessSummary::kLatenessBucketsMs[i] / 1000.0, l.cumulative[i]);
    }
    out += fmt::format("delayq_delivery_lateness_seconds_bucket{{queue=\"{}\",le=\"+Inf\"}} {}\n",
                       s.name, l.count);
    out += fmt::format("delayq_delivery_lateness_seconds_sum{{queue=\"{}\"}} {:.6f}\n", s.name,
                       l.sum_ms / 1000.0);
    out += fmt::format("delayq_delivery_lateness_seconds_count{{queue=\"{}\"}} {}\n", s.name, l.count);
  }
  Header(out, "delayq_http_request_duration_seconds", "histogram", "HTTP request latency by route.");
  for (size_t r = 0; r < routes_.size(); ++r) {
    const PerRoute& pr = routes_[r];
    const uint64_t count = pr.count.load(std::memory_order_relaxed);
    if (count == 0) continue;
    const char* route = RouteName(static_cast<Route>(r));
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBucketsSeconds.size(); ++i) {
      cumulative += pr.buckets[i].load(std::memory_order_relaxed);
      out += fmt::format("delayq_http_request_duration_seconds_bucket{{route=\"{}\",le=\"{}\"}} {}\n",
                         route, kBucketsSeconds[i], cumulative);
    }
    out += fmt::format("delayq_http_request_duration_seconds_bucket{{route=\"{}\",le=\"+Inf\"}} {}\n",
                       route, count);
    out += fmt::format("delayq_http_request_duration_seconds_sum{{route=\"{}\"}} {:.6f}\n", route,
                       pr.sum_us.load(std::memory_order_relaxed) / 1e6);
    out += fmt::format("delayq_http_request_duration_seconds_count{{route=\"{}\"}} {}\n", route, count);
  }
  Header(out, "delayq_http_requests_total", "counter", "HTTP requests by route and status class.");
  for (size_t r = 0; r < routes_.size(); ++r) {
    for (int c = 1; c <= 5; ++c) {
      uint64_t n = routes_[r].by_class[c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out += fmt::format("delayq_http_requests_total{{route=\"{}\",code=\"{}xx\"}} {}\n",
                         RouteName(static_cast<Route>(r)), c, n);
    }
  }
  Header(out, "delayq_http_connections", "gauge", "Open HTTP connections.");
  out += fmt::format("delayq_http_connections {}\n", connections.load());
  Header(out, "delayq_http_body_bytes", "gauge",
         "Bytes of request bodies held now, counted from Content-Length (bounded by --max-body-memory).");
  out += fmt::format("delayq_http_body_bytes {}\n", body_bytes.load());
  Header(out, "delayq_reserve_waiting", "gauge", "Reserve requests waiting for a job (long polls).");
  out += fmt::format("delayq_reserve_waiting {}\n", waiting.load());
  Header(out, "delayq_process_resident_memory_bytes", "gauge", "Resident memory of the server.");
  out += fmt::format("delayq_process_resident_memory_bytes {}\n", ResidentBytes());
  Header(out, "delayq_process_cpu_seconds_total", "counter", "CPU time of the server.");
  out += fmt::format("delayq_process_cpu_seconds_total {:.3f}\n", CpuSeconds());
  Header(out, "delayq_store_up", "gauge",
         "1 while the store can serve requests (Redis reachable and loaded; the embedded store open).");
  out += fmt::format("delayq_store_up {}\n", store_up ? 1 : 0);
  Header(out, "delayq_uptime_seconds", "gauge", "Seconds since the server started.");
  out += fmt::format("delayq_uptime_seconds {:.3f}\n", (NowUs() - started_us_) / 1e6);
  return out;
}

}  // namespace delayq::http
