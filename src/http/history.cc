#include "http/history.h"

#include "wire/json_writer.h"

namespace delayq::http {

void History::Add(int64_t now_ms, const std::vector<QueueStats>& stats) {
  std::lock_guard lock(mu_);
  for (const auto& s : stats) {
    auto& q = samples_[s.name];
    q.push_back({now_ms, s.scheduled, s.ready, s.reserved, s.dead, s.counters.enqueued, s.counters.delivered,
                 s.counters.acked, s.lateness.p99_ms});
    while (q.size() > keep_) q.pop_front();
  }
}

std::string History::Json(const std::vector<std::string>& queues) const {
  std::lock_guard lock(mu_);
  wire::JsonWriter w;
  w.BeginObject().Key("interval_ms").Int(interval_ms_).Key("queues").BeginObject();
  auto write = [&w](const std::string& name, const std::deque<HistorySample>& q) {
    w.Key(name).BeginArray();
    for (const auto& s : q) {
      w.BeginArray().Int(s.t_ms).Int(s.scheduled).Int(s.ready).Int(s.reserved).Int(s.dead);
      w.Uint(s.enqueued).Uint(s.delivered).Uint(s.acked).Double(s.lateness_p99_ms).EndArray();
    }
    w.EndArray();
  };
  if (queues.empty()) {
    for (const auto& [name, q] : samples_) write(name, q);
  } else {
    for (const auto& name : queues) {
      auto it = samples_.find(name);
      if (it != samples_.end()) write(name, it->second);
    }
  }
  w.EndObject().EndObject();
  return w.Take();
}

}  // namespace delayq::http
