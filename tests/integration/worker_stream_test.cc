// delayq::Worker over a delayq::Client takes its jobs by a push stream (include/delayq/worker.h),
// against the real `delayq serve`: acks in batches and no reserve, a stop that settles what ran
// and gives back what was prefetched unused, a server killed under it, and reserves when asked.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <set>
#include <string>

#include "delayq/client.h"
#include "delayq/worker.h"
#include "integration/server_fixture.h"
#include "support/test_certs.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

// Requests the server counted on routes ending in `suffix` (delayq_http_requests_total).
int64_t RequestsTo(Client& client, const std::string& suffix) {
  auto text = client.Metrics();
  if (!text.ok()) return -1;
  static const std::regex sample(R"re(delayq_http_requests_total\{route="([^"]*)"[^}]*\} (\S+))re");
  int64_t n = 0;
  for (std::sregex_iterator it(text->begin(), text->end(), sample), end; it != end; ++it) {
    const std::string route = (*it)[1];
    if (route.size() >= suffix.size() && route.compare(route.size() - suffix.size(), suffix.size(), suffix) == 0) {
      n += std::stoll((*it)[2]);
    }
  }
  return n;
}

void EnqueueN(Client& client, const std::string& queue, int n) {
  std::vector<EnqueueRequest> batch(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) batch[static_cast<size_t>(i)].payload = std::to_string(i);
  ASSERT_TRUE(client.EnqueueBatch(queue, batch).ok());
}

// Counts handled payloads; Wait returns once `n` distinct ones ran (or 60 s passed).
class Seen {
 public:
  void Add(const std::string& payload) {
    std::lock_guard lock(mu_);
    seen_.insert(payload);
    cv_.notify_all();
  }
  bool Wait(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 60s, [&] { return seen_.size() >= n; });
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return seen_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> seen_;
};

TEST(WorkerStream, AClientsWorkerStreamsAndAcksInBatches) {
  ServerProcess server;
  auto client = server.NewClient();
  EnqueueN(*client, "b", 300);
  Seen seen;
  Worker worker(*client, "b", [&](const Delivery& job) { seen.Add(job.payload); }, {.concurrency = 4});
  worker.Start();
  ASSERT_TRUE(seen.Wait(300));
  worker.Stop();
  EXPECT_TRUE(worker.streaming());
  const WorkerStats st = worker.stats();
  EXPECT_EQ(st.acked, 300u);
  EXPECT_EQ(st.errors, 0u);
  auto stats = client->Stats("b");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->ready + stats->reserved, 0);
  EXPECT_EQ(RequestsTo(*client, "/reserve"), 0);
  EXPECT_LT(RequestsTo(*client, "/ack"), 300) << "acks are batched";
}

// Over a stream, a handler's results go back in the batched acks: each job keeps its own.
TEST(WorkerStream, ResultsGoBackInTheBatchedAcks) {
  ServerProcess server;
  auto client = server.NewClient();
  QueueConfig config;
  config.keep_completed_ms = 3'600'000;
  ASSERT_TRUE(client->SetConfig("res", config).ok());
  EnqueueN(*client, "res", 50);
  Seen seen;
  Worker worker(*client, "res",
                [&](const Delivery& job) {
                  seen.Add(job.payload);
                  return std::string(R"({"square": )") +
                         std::to_string(std::stoi(job.payload) * std::stoi(job.payload)) + "}";
                },
                {.concurrency = 4});
  worker.Start();
  ASSERT_TRUE(seen.Wait(50));
  worker.Stop();
  EXPECT_TRUE(worker.streaming());
  EXPECT_EQ(worker.stats().acked, 50u);
  std::set<std::string> results;
  std::string cursor;
  do {
    auto page = client->ListJobs("res", ListRequest{JobState::kCompleted, 1000, cursor});
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& j : page->jobs) {
      const int n = std::stoi(j.payload);
      EXPECT_EQ(j.result, R"({"square": )" + std::to_string(n * n) + "}") << j.id;
      results.insert(j.result);
    }
    cursor = page->next_cursor;
  } while (!cursor.empty());
  EXPECT_EQ(results.size(), 50u);
  EXPECT_LT(RequestsTo(*client, "/ack"), 50) << "acks are batched";
}

// A server with a lower --max-body than the batches the worker makes refuses an ack batch whole
// (413): the worker splits it until each part fits, so every job is acked with its result (found
// by a hostile try of the Python and Node workers, which lost every job of the batch).
TEST(WorkerStream, AnAckBatchOverTheServersBodyLimitIsSplit) {
  ServerProcess server({"--max-body", "1048576"});
  auto client = server.NewClient();
  QueueConfig config;
  config.keep_completed_ms = 3'600'000;
  config.max_attempts = 2;
  ASSERT_TRUE(client->SetConfig("split", config).ok());
  EnqueueN(*client, "split", 40);
  Seen seen;
  Worker worker(*client, "split",
                [&](const Delivery& job) {
                  seen.Add(job.payload);
                  return "\"" + std::string(60'000, 'x') + "\"";  // 40 of them: 2.4 MB, over the 1 MiB body
                },
                {.concurrency = 4, .ack_delay_ms = 300});
  worker.Start();
  ASSERT_TRUE(seen.Wait(40));
  worker.Stop();
  EXPECT_EQ(worker.stats().acked, 40u);
  auto page = client->ListJobs("split", ListRequest{JobState::kCompleted, 1000, {}});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  size_t with_result = 0;
  for (const auto& j : page->jobs) with_result += j.result.size() == 60'002;
  EXPECT_EQ(with_result, 40u);
}

TEST(WorkerStream, AStopSettlesWhatRanAndGivesBackWhatWasPrefetchedUnused) {
  ServerProcess server;
  auto client = server.NewClient();
  EnqueueN(*client, "p", 10);
  std::atomic<int> ran{0};
  std::mutex mu;
  std::condition_variable cv;
  Worker* self = nullptr;
  Worker worker(*client, "p",
                [&](const Delivery&) {
                  ++ran;
                  cv.notify_all();
                  std::unique_lock lock(mu);  // finishes once Stop() began: nothing more may start
                  cv.wait_for(lock, 60s, [&] { return self->stopping(); });
                },
                {.concurrency = 1, .prefetch = 5});
  self = &worker;
  worker.Start();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return ran.load() == 1; }));
  }
  std::thread stopper([&] { worker.Stop(); });
  while (!worker.stopping()) std::this_thread::yield();
  cv.notify_all();
  stopper.join();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(worker.stats().acked, 1u);
  auto stats = client->Stats("p");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->reserved, 0);
  EXPECT_EQ(stats->ready, 9);
  auto again = client->Reserve("p", {.max = 9});
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 9u);
  for (const Delivery& d : *again) EXPECT_EQ(d.attempt, 1) << "given back unused";
}

TEST(WorkerStream, TheWorkerStreamsAgainAfterItsServerIsKilled) {
  ServerProcess server;
  auto client = server.NewClient();
  EnqueueN(*client, "k", 20);
  Seen seen;
  std::mutex mu;
  std::condition_variable cv;
  bool killed = false;  // the handlers past the fifth job wait for it: the rest comes after the restart
  Worker worker(*client, "k",
                [&](const Delivery& job) {
                  seen.Add(job.payload);
                  std::unique_lock lock(mu);
                  if (seen.size() >= 5) cv.wait_for(lock, 60s, [&] { return killed; });
                },
                {.concurrency = 2, .lease_ms = 2000, .on_error = [](const Status&) {}});
  worker.Start();
  ASSERT_TRUE(seen.Wait(5));
  server.Kill();     // from the test's thread, while the worker holds jobs
  server.Restart();  // the same port and data
  {
    std::lock_guard lock(mu);
    killed = true;
  }
  cv.notify_all();
  ASSERT_TRUE(seen.Wait(20)) << seen.size() << " of 20 ran";
  worker.Stop();
  EXPECT_GE(worker.stats().errors, 1u) << "the broken stream was counted";
  auto stats = client->Stats("k");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->scheduled + stats->ready, 0);
}

TEST(WorkerStream, OverTlsBigJobsArriveWholeAndAStopEndsTheStream) {
  TestCerts certs;
  ServerProcess server({"--tls-cert", certs.cert("server"), "--tls-key", certs.key("server")});
  ClientOptions o;
  o.tls_ca_file = certs.ca();
  auto client = server.NewClient(o);
  const std::string big(200'000, 'y');  // a stream line of many TLS records
  std::vector<EnqueueRequest> batch(20);
  for (int i = 0; i < 20; ++i) batch[static_cast<size_t>(i)].payload = "\"" + std::to_string(i) + big + "\"";
  ASSERT_TRUE(client->EnqueueBatch("tls", batch).ok());
  Seen seen;
  std::atomic<int> whole{0};
  Worker worker(*client, "tls",
                [&](const Delivery& job) {
                  if (job.payload.size() > big.size() && job.payload.ends_with(big + "\"")) ++whole;
                  seen.Add(job.payload);
                },
                {.concurrency = 2});
  worker.Start();
  ASSERT_TRUE(seen.Wait(20));
  worker.Stop();  // returns: cancelling the stream wakes its reader inside TLS
  EXPECT_TRUE(worker.streaming());
  EXPECT_EQ(whole.load(), 20);
  EXPECT_EQ(worker.stats().acked, 20u);
}

// A job that comes due while the handlers are idle wakes one of them (a nacked job's retry).
// (The slots and the keep-alive thread shared a condition variable, and the delivery woke the
// keep-alive thread instead: CliTest.WorkAcksOnExitZeroAndNacksOtherwise saw the retry sit.)
TEST(WorkerStream, AJobThatComesDueLaterWakesAnIdleHandler) {
  ServerProcess server;
  auto client = server.NewClient();
  QueueConfig config;
  config.max_attempts = 2;
  config.backoff.base_ms = 100;
  config.backoff.jitter = 0;
  ASSERT_TRUE(client->SetConfig("later", config).ok());
  EnqueueN(*client, "later", 1);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> attempts;
  Worker worker(*client, "later",
                [&](const Delivery& job) {
                  std::lock_guard lock(mu);
                  attempts.push_back(job.attempt);
                  cv.notify_all();
                  if (job.attempt == 1) throw std::runtime_error("not yet");
                },
                {.concurrency = 1, .on_error = [](const Status&) {}});
  worker.Start();
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 30s, [&] { return attempts.size() == 2; })) << attempts.size() << " deliveries";
  }
  worker.Stop();
  EXPECT_EQ(attempts, (std::vector<int>{1, 2}));
  EXPECT_EQ(worker.stats().nacked, 1u);
  EXPECT_EQ(worker.stats().acked, 1u);
}

// The server stops (SIGTERM: its streams' deliveries stay leased) while two handlers run and two
// jobs wait prefetched: once it is back, the prefetched two are given back (they went dead at
// their lease's end with max_attempts 1, never run) and all six are acked.
TEST(WorkerStream, PrefetchedJobsAreGivenBackAfterTheServerRestarts) {
  ServerProcess server;
  auto client = server.NewClient();
  QueueConfig config;
  config.max_attempts = 1;
  // Long enough for a sanitizer build's stop and start; prefetched jobs never given back still
  // go dead at its end, well inside Seen::Wait's minute.
  config.lease_ms = 30'000;
  ASSERT_TRUE(client->SetConfig("restart", config).ok());
  EnqueueN(*client, "restart", 6);
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  bool restarted = false;
  Seen seen;
  Worker worker(*client, "restart",
                [&](const Delivery& job) {
                  std::unique_lock lock(mu);
                  if (++running <= 2) {
                    cv.notify_all();
                    cv.wait_for(lock, 60s, [&] { return restarted; });
                  }
                  lock.unlock();
                  seen.Add(job.payload);
                },
                {.concurrency = 2, .on_error = [](const Status&) {}});  // a window of 4: 2 running, 2 prefetched
  worker.Start();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return running >= 2; }));
  }
  EXPECT_EQ(server.Terminate(), 0);
  server.Restart();
  {
    std::lock_guard lock(mu);
    restarted = true;
  }
  cv.notify_all();
  ASSERT_TRUE(seen.Wait(6)) << seen.size() << " of 6 ran";
  worker.Stop();
  auto stats = client->Stats("restart");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->dead, 0);
  EXPECT_EQ(stats->counters.acked, 6u);
}

TEST(WorkerStream, StreamOffReserves) {
  ServerProcess server;
  auto client = server.NewClient();
  EnqueueN(*client, "r", 5);
  Seen seen;
  Worker worker(*client, "r", [&](const Delivery& job) { seen.Add(job.payload); },
                {.concurrency = 2, .wait_ms = 200, .stream = false});
  worker.Start();
  ASSERT_TRUE(seen.Wait(5));
  worker.Stop();
  EXPECT_FALSE(worker.streaming());
  EXPECT_EQ(worker.stats().acked, 5u);
  EXPECT_GE(RequestsTo(*client, "/reserve"), 1);
}

TEST(WorkerStream, AStopWhileTheServerIsDownReturns) {
  auto server = std::make_unique<ServerProcess>();
  auto client = server->NewClient();
  server->Kill();
  Worker worker(*client, "down", [](const Delivery&) {}, {.on_error = [](const Status&) {}});
  worker.Start();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (worker.stats().errors == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();  // until the stream failed to open
  }
  EXPECT_GE(worker.stats().errors, 1u);
  worker.Stop();
  EXPECT_TRUE(worker.streaming());
}

}  // namespace
}  // namespace delayq::testing
