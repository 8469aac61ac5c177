// Durability by callback (issue 16): in sync mode EnqueueAsync / EnqueueBatchAsync / AckBatchAsync
// (and NackAsync / TouchAsync / CancelAsync / RescheduleAsync)
// return at once and answer only after the fsync that covers their writes, from the syncer
// thread; one fsync answers many callers; a failed fsync answers each of them with the error;
// closing the engine answers what is still waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "store/embedded/engine_harness.h"

namespace delayq::testing {
namespace {

EnqueueRequest Job(std::string payload, int64_t delay_ms = 0) {
  EnqueueRequest r;
  r.payload = std::move(payload);
  r.when.delay_ms = delay_ms;
  return r;
}

// Counts answers and lets a test wait for a number of them (no sleeps).
class Answers {
 public:
  void Add(Status s) {
    std::lock_guard lock(mu_);
    statuses_.push_back(std::move(s));
    cv_.notify_all();
  }
  bool WaitFor(size_t n, std::chrono::seconds guard = std::chrono::seconds(30)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, guard, [&] { return statuses_.size() >= n; });
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return statuses_.size();
  }
  std::vector<Status> statuses() {
    std::lock_guard lock(mu_);
    return statuses_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Status> statuses_;
};

TEST(AsyncDurability, AnEnqueueIsAnsweredAfterTheFsyncWithoutHoldingItsCaller) {
  EngineHarness h(Durability::kSync);
  h.faults().HoldSyncs();  // a slow disk
  Answers answers;
  std::string id;
  h.engine().EnqueueAsync("q", Job("a"), [&](Result<EnqueueResult> r) {
    if (r.ok()) id = r->id;
    answers.Add(r.status());
  });
  std::vector<EnqueueRequest> batch = {Job("b"), Job("c", 60'000)};
  h.engine().EnqueueBatchAsync("q", batch, [&](Result<std::vector<EnqueueResult>> r) {
    EXPECT_TRUE(!r.ok() || r->size() == 2u);
    answers.Add(r.status());
  });
  // Both calls came back with the fsync still running: nothing is answered yet.
  EXPECT_EQ(answers.size(), 0u);
  h.faults().ReleaseSyncs();
  ASSERT_TRUE(answers.WaitFor(2));
  for (const Status& s : answers.statuses()) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(h.engine().Get("q", JobRef::ById(id)).ok());
  EXPECT_EQ(h.engine().Stats("q")->ready, 2);
}

TEST(AsyncDurability, AFailedFsyncAnswersEveryWaitingCallerWithTheError) {
  EngineHarness h(Durability::kSync);
  h.faults().HoldSyncs();
  h.faults().FailSyncs(1);
  Answers answers;
  for (int i = 0; i < 3; ++i) {
    h.engine().EnqueueAsync("q", Job("x"), [&](Result<EnqueueResult> r) { answers.Add(r.status()); });
  }
  h.faults().ReleaseSyncs();
  ASSERT_TRUE(answers.WaitFor(3));
  // The first sync failed: whoever it covered hears so; a caller whose write came after it may
  // have been covered by the next (good) sync instead. Never is an answer lost or doubled.
  int failed = 0;
  for (const Status& s : answers.statuses()) {
    if (!s.ok()) {
      ++failed;
      EXPECT_EQ(s.code(), Code::kIoError) << s.ToString();
      EXPECT_NE(s.message().find("syncing the write-ahead log"), std::string::npos) << s.message();
    }
  }
  EXPECT_GE(failed, 1);
  EXPECT_EQ(answers.size(), 3u);
}

TEST(AsyncDurability, AcksAreAnsweredAfterTheFsyncAndEachReceiptGetsItsOwnAnswer) {
  EngineHarness h(Durability::kSync);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.engine().Enqueue("q", Job("j")).ok());
  auto got = h.engine().Reserve("q", {.max = 3, .lease_ms = 30'000});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 3u);
  std::vector<std::string> receipts = {(*got)[0].receipt, (*got)[1].receipt, (*got)[0].receipt, "forged.0.0",
                                       (*got)[2].receipt};
  h.faults().HoldSyncs();
  std::vector<Status> results;
  Answers answers;
  h.engine().AckBatchAsync("q", receipts, [&](std::vector<Status> r) {
    results = std::move(r);
    answers.Add(Status::Ok());
  });
  EXPECT_EQ(answers.size(), 0u);
  h.faults().ReleaseSyncs();
  ASSERT_TRUE(answers.WaitFor(1));
  ASSERT_EQ(results.size(), receipts.size());
  EXPECT_TRUE(results[0].ok() && results[1].ok() && results[2].ok() && results[4].ok());
  EXPECT_EQ(results[3].code(), Code::kInvalidArgument);
  EXPECT_EQ(h.engine().Stats("q")->reserved, 0);
}

// Nacks and touches too: each returns at once, the writes of all of them are covered by the
// fsyncs that follow, and each is answered after its write is durable (a failed fsync answers
// with the error). Before, each held its thread for an fsync of its own: a batch nack of N
// receipts was N fsyncs in a row.
TEST(AsyncDurability, NacksAndTouchesAreAnsweredAfterTheFsyncWithoutHoldingTheirCaller) {
  EngineHarness h(Durability::kSync);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.engine().Enqueue("q", Job("j")).ok());
  auto got = h.engine().Reserve("q", {.max = 4, .lease_ms = 30'000});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 4u);
  h.faults().HoldSyncs();
  Answers answers;
  std::vector<Result<NackResult>> nacks;
  std::mutex mu;
  for (int i = 0; i < 2; ++i) {
    h.engine().NackAsync("q", {(*got)[i].receipt, 60'000, "later", i == 1}, [&](Result<NackResult> r) {
      {
        std::lock_guard lock(mu);
        nacks.push_back(r);
      }
      answers.Add(r.status());
    });
  }
  Result<TouchResult> touched = Status::Internal("unanswered");
  h.engine().TouchAsync("q", {(*got)[2].receipt, 90'000, {}}, [&](Result<TouchResult> r) {
    touched = r;
    answers.Add(r.status());
  });
  // Errors need no fsync: answered at once, on this thread.
  h.engine().NackAsync("q", {"forged.0.0", std::nullopt, "", false},
                       [&](Result<NackResult> r) { answers.Add(r.status()); });
  h.engine().TouchAsync("q", {(*got)[3].receipt, -1, {}}, [&](Result<TouchResult> r) { answers.Add(r.status()); });
  ASSERT_EQ(answers.size(), 2u) << "the durable ones wait for the fsync";
  EXPECT_EQ(answers.statuses()[0].code(), Code::kInvalidArgument);
  EXPECT_EQ(answers.statuses()[1].code(), Code::kInvalidArgument);
  const auto stats = h.engine().Stats("q");  // the writes are done and visible meanwhile
  EXPECT_EQ(stats->scheduled, 1);
  EXPECT_EQ(stats->dead, 1);
  EXPECT_EQ(stats->reserved, 2);
  h.faults().ReleaseSyncs();
  ASSERT_TRUE(answers.WaitFor(5));
  std::lock_guard lock(mu);
  ASSERT_EQ(nacks.size(), 2u);
  for (const auto& n : nacks) ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_TRUE((nacks[0]->state == JobState::kDead) != (nacks[1]->state == JobState::kDead));
  ASSERT_TRUE(touched.ok()) << touched.status().ToString();
  EXPECT_EQ(touched->lease_deadline_ms, h.NowMs() + 90'000);

  // A failed fsync: the nack's answer is the error.
  h.faults().FailSyncs(1);
  Answers failed;
  h.engine().NackAsync("q", {(*got)[3].receipt, 0, "x", false}, [&](Result<NackResult> r) { failed.Add(r.status()); });
  ASSERT_TRUE(failed.WaitFor(1));
  EXPECT_EQ(failed.statuses()[0].code(), Code::kIoError);
}

// Cancel and reschedule as well (DELETE and PATCH /jobs/{id}).
TEST(AsyncDurability, CancelsAndReschedulesAreAnsweredAfterTheFsync) {
  EngineHarness h(Durability::kSync);
  auto a = h.engine().Enqueue("q", Job("a", 60'000));
  auto b = h.engine().Enqueue("q", Job("b", 60'000));
  ASSERT_TRUE(a.ok() && b.ok());
  h.faults().HoldSyncs();
  Answers answers;
  Result<delayq::Job> moved = Status::Internal("unanswered");
  h.engine().CancelAsync("q", JobRef::ById(a->id), [&](Status s) { answers.Add(s); });
  h.engine().RescheduleAsync("q", JobRef::ById(b->id), When{.delay_ms = 5'000}, [&](Result<delayq::Job> r) {
    moved = r;
    answers.Add(r.status());
  });
  h.engine().CancelAsync("q", JobRef::ById(a->id), [&](Status s) { answers.Add(s); });  // gone already
  h.engine().RescheduleAsync("nope", JobRef::ById(b->id), When{.delay_ms = 1},
                             [&](Result<delayq::Job> r) { answers.Add(r.status()); });
  ASSERT_EQ(answers.size(), 2u) << "the errors at once; the writes wait for the fsync";
  EXPECT_EQ(answers.statuses()[0].code(), Code::kNotFound);
  EXPECT_EQ(answers.statuses()[1].code(), Code::kNotFound);
  h.faults().ReleaseSyncs();
  ASSERT_TRUE(answers.WaitFor(4));
  EXPECT_TRUE(answers.statuses()[2].ok()) << answers.statuses()[2].ToString();
  EXPECT_TRUE(answers.statuses()[3].ok()) << answers.statuses()[3].ToString();
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->due_at_ms, h.NowMs() + 5'000);
  EXPECT_EQ(h.engine().Stats("q")->scheduled, 1);
}

// Many callers on many threads, async and blocking mixed, with errors among them: every call is
// answered once, the right way, and the fsyncs are shared.
TEST(AsyncDurability, ConcurrentCallersShareFsyncsAndEachIsAnsweredOnce) {
  EngineHarness h(Durability::kSync);
  constexpr int kThreads = 8, kEach = 200;
  Answers answers;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const bool bad = i % 10 == 7;  // an empty payload: refused before any write
        EnqueueRequest r = Job(bad ? "" : "p");
        if ((t + i) % 3 == 0) {
          auto blocking = h.engine().Enqueue("q", r);
          if (blocking.ok() == bad) ++wrong;
          answers.Add(Status::Ok());
          continue;
        }
        h.engine().EnqueueAsync("q", r, [&, bad](Result<EnqueueResult> got) {
          if (got.ok() == bad) ++wrong;
          if (bad && got.status().code() != Code::kInvalidArgument) ++wrong;
          answers.Add(Status::Ok());
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(answers.WaitFor(kThreads * kEach));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(answers.size(), static_cast<size_t>(kThreads * kEach));
  const int good = kThreads * kEach - kThreads * (kEach / 10);
  EXPECT_EQ(h.engine().Stats("q")->ready, good);
  EXPECT_LT(h.engine().Info().syncs, static_cast<uint64_t>(good)) << "no fsync was shared";
}

TEST(AsyncDurability, ClosingTheEngineAnswersWhatStillWaits) {
  EngineHarness h(Durability::kSync);
  h.faults().HoldSyncs();
  Answers answers;
  for (int i = 0; i < 4; ++i) {
    h.engine().EnqueueAsync("q", Job("x"), [&](Result<EnqueueResult> r) { answers.Add(r.status()); });
  }
  std::thread closer([&] { h.Close(); });  // waits for the held sync, then answers the rest
  h.faults().ReleaseSyncs();
  closer.join();
  EXPECT_EQ(answers.size(), 4u);
  for (const Status& s : answers.statuses()) EXPECT_TRUE(s.ok()) << s.ToString();
  h.Reopen();
  EXPECT_EQ(h.engine().Stats("q")->ready, 4) << "every answered job is there after a restart";
}

}  // namespace
}  // namespace delayq::testing
