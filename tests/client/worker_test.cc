// delayq::Worker on the embedded store (real time: the handler's running time is what is under
// test): return acks, throwing nacks with the message, a lease kept alive while a handler runs
// longer than it, Stop finishing the handlers in flight.
#include "delayq/worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "delayq/engine.h"
#include "support/temp_dir.h"

namespace delayq {
namespace {

std::unique_ptr<Engine> OpenEngine(const testing::TempDir& dir) {
  auto engine = Engine::Open({.path = dir.Sub("data"), .durability = Durability::kNone});
  if (!engine.ok()) throw std::runtime_error(engine.status().ToString());
  return std::move(*engine);
}

// Polls `done` (a condition of the store, not time) until it holds, for at most `limit`.
template <class Fn>
bool Eventually(Fn done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(WorkerTest, ReturnAcksAndThrowingNacksWithTheMessage) {
  testing::TempDir dir;
  auto engine = OpenEngine(dir);
  QueueConfig config;
  config.max_attempts = 1;
  ASSERT_TRUE(engine->SetConfig("w", config).ok());
  ASSERT_TRUE(engine->Enqueue("w", {.payload = "ok"}).ok());
  auto bad = engine->Enqueue("w", {.payload = "bad"});
  ASSERT_TRUE(bad.ok());
  Worker worker(*engine, "w",
                [](const Delivery& d) {
                  if (d.payload == "bad") throw std::runtime_error("no such order");
                },
                {.concurrency = 2, .wait_ms = 200});
  worker.Start();
  ASSERT_TRUE(Eventually([&] { return worker.stats().acked == 1 && worker.stats().nacked == 1; }));
  worker.Stop();
  auto job = engine->Get("w", JobRef::ById(bad->id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kDead);
  EXPECT_EQ(job->last_error, "no such order");
  EXPECT_EQ(engine->Stats("w")->ready + engine->Stats("w")->scheduled, 0);
}

// The handler is handed the producer's W3C Trace Context with the delivery (TraceParentOf).
TEST(WorkerTest, TheHandlerGetsTheProducersTraceContext) {
  testing::TempDir dir;
  auto engine = OpenEngine(dir);
  EnqueueRequest traced{.payload = "1"};
  traced.headers = {{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, {"tracestate", "a=1"}};
  ASSERT_TRUE(engine->Enqueue("w", traced).ok());
  std::mutex m;
  std::string parent, state;
  Worker worker(*engine, "w",
                [&](const Delivery& d) {
                  std::lock_guard lock(m);
                  parent = TraceParentOf(d.headers);
                  state = TraceStateOf(d.headers);
                },
                {.wait_ms = 200});
  worker.Start();
  ASSERT_TRUE(Eventually([&] { return worker.stats().acked == 1; }));
  worker.Stop();
  std::lock_guard lock(m);
  EXPECT_EQ(parent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_EQ(state, "a=1");
}

// A handler reports its progress through its worker: the job shows it while the handler runs.
TEST(WorkerTest, AHandlerReportsItsProgress) {
  testing::TempDir dir;
  auto engine = OpenEngine(dir);
  auto made = engine->Enqueue("w", EnqueueRequest{.payload = "1"});
  ASSERT_TRUE(made.ok());
  std::mutex m;
  std::string seen;
  Status reported = Status::Internal("not called");
  Worker* self = nullptr;
  Worker worker(*engine, "w",
                [&](const Delivery& d) {
                  Status s = self->Progress(d, R"({"step": 1})");
                  auto job = engine->Get("w", JobRef::ById(d.id));
                  std::lock_guard lock(m);
                  reported = s;
                  seen = job.ok() ? job->progress : job.status().ToString();
                },
                {.wait_ms = 200});
  self = &worker;
  worker.Start();
  ASSERT_TRUE(Eventually([&] { return worker.stats().acked == 1; }));
  worker.Stop();
  std::lock_guard lock(m);
  EXPECT_TRUE(reported.ok()) << reported.ToString();
  EXPECT_EQ(seen, R"({"step": 1})");
  EXPECT_EQ(engine->Get("w", JobRef::ById(made->id)).code(), Code::kNotFound) << "acked: gone";
  Delivery other;
  other.id = made->id;
  EXPECT_EQ(worker.Progress(other, "1").code(), Code::kInvalidArgument) << "not running here";
}

// A handler that returns a std::string returns its job's result, kept with the job while the
// queue keeps completed jobs; an empty string is none; a result the store would refuse (not JSON)
// is reported and the job acked without it (refusing the ack would only run the work again).
TEST(WorkerTest, AHandlerReturnsItsJobsResult) {
  testing::TempDir dir;
  auto engine = OpenEngine(dir);
  QueueConfig config;
  config.keep_completed_ms = 3'600'000;
  ASSERT_TRUE(engine->SetConfig("w", config).ok());
  std::vector<std::string> ids;
  for (const char* p : {"1", "2", "3"}) {
    auto made = engine->Enqueue("w", EnqueueRequest{.payload = p});
    ASSERT_TRUE(made.ok());
    ids.push_back(made->id);
  }
  std::mutex m;
  std::vector<Status> reported;
  Worker worker(*engine, "w",
                [](const Delivery& d) -> std::string {
                  if (d.payload == "1") return R"({"n": 1})";
                  if (d.payload == "2") return "";
                  return "{not json";
                },
                {.wait_ms = 200, .on_error = [&](const Status& s) {
                   std::lock_guard lock(m);
                   reported.push_back(s);
                 }});
  worker.Start();
  ASSERT_TRUE(Eventually([&] { return worker.stats().acked == 3; }));
  worker.Stop();
  auto job = [&](size_t i) { return engine->Get("w", JobRef::ById(ids[i])); };
  ASSERT_TRUE(job(0).ok());
  EXPECT_EQ(job(0)->state, JobState::kCompleted);
  EXPECT_EQ(job(0)->result, R"({"n": 1})");
  EXPECT_EQ(job(1)->result, "") << "an empty string is none";
  EXPECT_EQ(job(2)->state, JobState::kCompleted) << "acked without the refused result";
  EXPECT_EQ(job(2)->result, "");
  std::lock_guard lock(m);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_NE(reported[0].message().find("the handler's result for job " + ids[2]), std::string::npos)
      << reported[0].ToString();
  // A handler returning void still compiles and acks, as before.
  Worker plain(*engine, "w", [](const Delivery&) {});
}

// The queue's lease is 2 s and the handler runs 4 s: its lease is touched meanwhile, so no other
// slot receives the job, and it is delivered once. (The keep-alive waited 30 s between touches
// when WorkerOptions::lease_ms was unset, and the job went to a second handler.)
TEST(WorkerTest, AHandlerLongerThanTheLeaseKeepsItsJob) {
  testing::TempDir dir;
  auto engine = OpenEngine(dir);
  QueueConfig config;
  config.lease_ms = 2'000;  // touched every third of it: a touch may come 1.3 s late (a sanitizer build)
  ASSERT_TRUE(engine->SetConfig("long", config).ok());
  ASSERT_TRUE(engine->Enqueue("long", {.payload = "slow"}).ok());
  std::mutex mu;
  std::vector<int32_t> attempts;
  Worker worker(*engine, "long",
                [&](const Delivery& d) {
                  {
                    std::lock_guard lock(mu);
                    attempts.push_back(d.attempt);
                  }
                  std::this_thread::sleep_for(std::chrono::milliseconds(4'000));  // the long job itself
                },
                {.concurrency = 3, .wait_ms = 200});
  worker.Start();
  ASSERT_TRUE(Eventually([&] { return worker.stats().acked == 1; }));
  worker.Stop();
  EXPECT_EQ(attempts, std::vector<int32_t>{1}) << "the job was handed out again while its handler ran";
  EXPECT_EQ(worker.stats().errors, 0u);
  EXPECT_EQ(engine->Stats("long")->counters.redelivered, 0u);
}

TEST(WorkerTest, StopFinishesTheHandlersInFlight) {
  testing::TempDir dir;
  auto engine = OpenEngine(dir);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine->Enqueue("stop", {.payload = std::to_string(i)}).ok());
  std::atomic<int> started{0}, finished{0};
  Worker worker(*engine, "stop",
                [&](const Delivery&) {
                  ++started;
                  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a job in flight at Stop
                  ++finished;
                },
                {.concurrency = 2, .wait_ms = 200});
  worker.Start();
  ASSERT_TRUE(Eventually([&] { return started.load() >= 1; }));
  worker.Stop();
  EXPECT_EQ(started.load(), finished.load()) << "Stop returned with a handler still running";
  EXPECT_EQ(static_cast<int>(worker.stats().acked), finished.load());
  auto stats = engine->Stats("stop");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->ready + stats->reserved, 4 - finished.load()) << "unfinished jobs stay in the queue";
}

// Stop() right after Start(): the keep-alive thread, not yet waiting when Stop() told it, slept
// its whole period (a third of the 30 s lease) before Stop() could return.
TEST(WorkerTest, StopRightAfterStartReturnsAtOnce) {
  testing::TempDir dir;
  auto engine = OpenEngine(dir);
  for (int i = 0; i < 3; ++i) {
    Worker worker(*engine, "idle", [](const Delivery&) {}, {.wait_ms = 200});
    const auto start = std::chrono::steady_clock::now();
    worker.Start();
    worker.Stop();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "round " << i;
  }
}

}  // namespace
}  // namespace delayq
