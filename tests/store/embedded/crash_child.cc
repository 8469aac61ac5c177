// The process the crash test kills: it enqueues (sync durability) from 4 threads, reserves and
// acks some jobs, and reports on stdout every operation that returned success:
//   E <id> <due_at_ms>   enqueue acknowledged
//   R <id>               reserved
//   A <id>               ack acknowledged
// It runs until it is killed.
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "delayq/engine.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: crash_child DATA_DIR\n");
    return 2;
  }
  delayq::EngineOptions options;
  options.path = argv[1];
  options.durability = delayq::Durability::kSync;
  auto engine = delayq::Engine::Open(options);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  delayq::Queue& q = **engine;
  std::mutex out;
  auto report = [&](const std::string& line) {
    std::lock_guard lock(out);
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (uint64_t i = 0;; ++i) {
        delayq::EnqueueRequest r;
        r.payload = "job " + std::to_string(t) + "/" + std::to_string(i);
        // A third due at once (consumed below), the rest within 10 minutes.
        r.when.delay_ms = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 600'000);
        if (i % 5 == 0) r.key = "key-" + std::to_string(t) + "-" + std::to_string(i);
        auto e = q.Enqueue("crash", r);
        if (e.ok()) report("E " + e->id + " " + std::to_string(e->due_at_ms) + "\n");
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t n = 0;; ++n) {
      auto got = q.Reserve("crash", {4, 0, 5000});
      if (!got.ok()) continue;
      for (auto& d : *got) {
        report("R " + d.id + "\n");
        if (n % 2 == 0 && q.Ack("crash", d.receipt).ok()) report("A " + d.id + "\n");
      }
    }
  });
  for (auto& t : threads) t.join();
}
