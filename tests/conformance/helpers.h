// Helpers shared by the files of the conformance suite.
#pragma once

#include <unistd.h>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "conformance/queue_conformance.h"

namespace delayq::testing {

// A queue name of its own for the running test (stores may be shared between tests).
inline std::string QueueName() {
  static std::atomic<int> n{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("conf.") + info->name() + "." + std::to_string(n++) + "." + std::to_string(::getpid());
  for (char& c : name) {
    if (c == '/') c = '.';
  }
  return name;
}

inline EnqueueRequest Job(std::string payload, std::optional<int64_t> delay_ms = std::nullopt) {
  EnqueueRequest r;
  r.payload = std::move(payload);
  r.when.delay_ms = delay_ms;
  return r;
}

inline EnqueueResult MustEnqueue(Queue& q, const std::string& queue, const EnqueueRequest& r) {
  auto res = q.Enqueue(queue, r);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? *res : EnqueueResult{};
}

inline std::vector<Delivery> MustReserve(Queue& q, const std::string& queue, int32_t max = 1000,
                                         std::optional<int64_t> lease_ms = std::nullopt) {
  ReserveRequest r;
  r.max = max;
  r.lease_ms = lease_ms;
  auto res = q.Reserve(queue, r);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? *res : std::vector<Delivery>{};
}

inline QueueStats MustStats(Queue& q, const std::string& queue) {
  auto s = q.Stats(queue);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : QueueStats{};
}

// The stats once `done` holds of them: at once on a store with a manual clock; on one with the
// real clock (Redis), due jobs are moved to ready by its scheduler a moment after they are due,
// later on a loaded machine, so the stats are read again until they show it (10 s at most).
template <class Pred>
QueueStats StatsWhen(QueueHarness& h, const std::string& queue, Pred done) {
  QueueStats s = MustStats(h.queue(), queue);
  for (int i = 0; i < 1000 && !h.exact_time() && !done(s); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a poll of Redis' state
    s = MustStats(h.queue(), queue);
  }
  return s;
}

// A reserve after time passed for something the store's own threads do (a lease reaped, a job
// promoted): at once on a manual clock; on a real one, again until it hands out `want` jobs (the
// Redis scheduler reaps and promotes a moment after, later on a loaded machine; 10 s at most).
inline std::vector<Delivery> ReserveEventually(QueueHarness& h, const std::string& queue, size_t want = 1,
                                               int32_t max = 1000, std::optional<int64_t> lease_ms = std::nullopt) {
  std::vector<Delivery> got = MustReserve(h.queue(), queue, max, lease_ms);
  for (int i = 0; i < 1000 && !h.exact_time() && got.size() < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a poll of the store's state
    auto more = MustReserve(h.queue(), queue, max, lease_ms);
    got.insert(got.end(), more.begin(), more.end());
  }
  return got;
}

// Starts a waiting reserve; the future is ready when it is answered.
inline std::future<Result<std::vector<Delivery>>> ReserveWaiting(Queue& q, const std::string& queue, int64_t wait_ms,
                                                                 int32_t max = 1) {
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto future = promise->get_future();
  ReserveRequest r;
  r.max = max;
  r.wait_ms = wait_ms;
  q.ReserveAsync(queue, r, [promise](Result<std::vector<Delivery>> res) { promise->set_value(std::move(res)); });
  return future;
}

template <class T>
T Await(std::future<T>& f) {
  // A guard against a hang, not a synchronisation: the answer is awaited on the future.
  if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within 30 s";
    std::abort();
  }
  return f.get();
}

// Reserves one job at a time until the queue hands out no more (its limit holds the rest back):
// on a sharded queue each shard holds its share of the limit, so it takes a reserve per shard.
inline std::vector<Delivery> TakeUntilHeldBack(Queue& q, const std::string& queue) {
  std::vector<Delivery> held;
  for (int i = 0; i < 64; ++i) {
    auto d = MustReserve(q, queue, 1, 3'600'000);
    if (d.empty()) break;
    held.push_back(d[0]);
  }
  return held;
}

// Enough jobs that every shard of a sharded queue has several.
inline constexpr int kJobsForEveryShard = 64;

// A reserve of up to 10 jobs whose answer stops at `max_bytes`.
inline std::vector<Delivery> MustReserveBytes(Queue& q, const std::string& queue, int64_t max_bytes) {
  ReserveRequest r;
  r.max = 10;
  r.max_bytes = max_bytes;
  auto res = q.Reserve(queue, r);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? *res : std::vector<Delivery>{};
}

// Reserves until `n` jobs were received, letting time pass in small steps.
inline std::vector<Delivery> ReceiveAll(QueueHarness& h, const std::string& queue, size_t n, int64_t step_ms,
                                        int max_steps = 400) {
  std::vector<Delivery> got;
  for (int i = 0; i < max_steps && got.size() < n; ++i) {
    auto batch = MustReserve(h.queue(), queue);
    const int64_t now = h.NowMs();
    for (auto& d : batch) {
      EXPECT_GE(now, d.due_at_ms) << "job " << d.id << " delivered before it was due";
      got.push_back(std::move(d));
    }
    if (got.size() < n) h.Advance(step_ms);
  }
  return got;
}

inline std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace delayq::testing
