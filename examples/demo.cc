// delayq in-process, in one screen: enqueue jobs with delays, consume them as they come due,
// nack one to see the back-off, and print the queue's stats.
#include <cstdio>

#include "delayq/engine.h"

int main(int argc, char** argv) {
  delayq::EngineOptions options;
  options.path = argc > 1 ? argv[1] : "./delayq-data";
  auto opened = delayq::Engine::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "delayq: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  delayq::Engine& q = **opened;

  for (int64_t delay : {1500, 500, 1000}) {
    delayq::EnqueueRequest r;
    r.payload = "{\"reminder\":" + std::to_string(delay) + "}";
    r.when.delay_ms = delay;
    auto e = q.Enqueue("demo", r);
    if (!e.ok()) {
      std::fprintf(stderr, "enqueue: %s\n", e.status().ToString().c_str());
      return 1;
    }
    std::printf("enqueued %s due in %lld ms\n", e->id.c_str(), static_cast<long long>(delay));
  }
  bool nacked = false;
  for (int received = 0; received < 4;) {
    delayq::ReserveRequest reserve;
    reserve.max = 10;
    reserve.wait_ms = 5000;
    auto jobs = q.Reserve("demo", reserve);
    if (!jobs.ok() || jobs->empty()) break;
    for (const auto& job : *jobs) {
      const int64_t late = delayq::SystemClock().NowMs() - job.due_at_ms;
      std::printf("received %s attempt %d payload %s (%lld ms after due)\n", job.id.c_str(), job.attempt,
                  job.payload.c_str(), static_cast<long long>(late));
      ++received;
      if (!nacked) {  // fail the first one once: it comes back after 200 ms
        nacked = true;
        delayq::NackRequest nack;
        nack.receipt = job.receipt;
        nack.retry_in_ms = 200;
        nack.error = "demo";
        auto n = q.Nack("demo", nack);
        std::printf("  nacked: retry at +200 ms (%s)\n", n.ok() ? "ok" : n.status().ToString().c_str());
      } else {
        (void)q.Ack("demo", job.receipt);
      }
    }
  }
  auto s = q.Stats("demo");
  if (s.ok()) {
    std::printf("stats: enqueued %llu, delivered %llu, acked %llu, lateness p50 %.2f ms, max %.2f ms\n",
                static_cast<unsigned long long>(s->counters.enqueued),
                static_cast<unsigned long long>(s->counters.delivered),
                static_cast<unsigned long long>(s->counters.acked), s->lateness.p50_ms, s->lateness.max_ms);
  }
}
