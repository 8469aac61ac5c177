// The conformance suite, waiting for an outcome (SPEC §11.3) on every store: a wait answers once
// the job is completed (with its result, keep_completed_ms 0 too), dead or cancelled, or at the end
// of its wait_ms with the job as it then is; never earlier with a state that is not final (a nack
// that retries does not end it). A job already final answers at once; no such job is kNotFound; a
// wait_ms out of 0..60 000 is refused; a restart ends the waits with kUnavailable (wait again).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"
#include "support/outcome_wait.h"

namespace delayq::testing {
namespace {

bool Answered(Outcome& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

// A job enqueued and reserved: its id and its delivery's receipt.
struct Reserved {
  std::string id, receipt;
};
Reserved EnqueueAndReserve(Queue& q, const std::string& queue, EnqueueRequest r) {
  const EnqueueResult made = MustEnqueue(q, queue, r);
  auto got = MustReserve(q, queue, 1);
  EXPECT_EQ(got.size(), 1u);
  return {made.id, got.empty() ? "" : got[0].receipt};
}

constexpr int64_t kLong = 60'000;  // a wait that only its outcome ends

}  // namespace

TEST_P(QueueConformance, AWaitAnswersAtTheAckWithItsResultThoughNothingIsKept) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("order-9");
  r.key = "order-9";
  const Reserved job = EnqueueAndReserve(q(), queue, r);
  Outcome by_id = WaitOn(q(), queue, JobRef::ById(job.id), kLong);
  Outcome by_key = WaitOn(q(), queue, JobRef::ByKey("order-9"), kLong);
  h_->AwaitOpenWaits(2);
  EXPECT_FALSE(Answered(by_id)) << "a reserved job is not final: the wait goes on";
  ASSERT_TRUE(q().Ack(queue, AckRequest{job.receipt, R"({"paid": 1999})"}).ok());

  for (Outcome* f : {&by_id, &by_key}) {
    auto outcome = AwaitOutcome(*f);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    EXPECT_EQ(outcome->id, job.id);
    EXPECT_EQ(outcome->state, JobState::kCompleted);
    EXPECT_EQ(outcome->result, R"({"paid": 1999})");
    EXPECT_EQ(outcome->payload, "order-9");
    EXPECT_GT(outcome->completed_at_ms, 0);
  }
  // Kept for the waiters a while (Limits::kOutcomeHoldMs), then deleted as with keep_completed_ms.
  auto kept = q().Get(queue, JobRef::ById(job.id));
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->state, JobState::kCompleted);
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("order-9")).status().code(), Code::kNotFound)
      << "its key was released at the ack, as without a wait";
  EXPECT_EQ(q().Ack(queue, job.receipt).code(), Code::kNotFound);
  if (!h_->exact_time()) return;  // the hold's end takes a minute of real time elsewhere
  h_->Advance(Limits::kOutcomeHoldMs - 2);
  EXPECT_TRUE(q().Get(queue, JobRef::ById(job.id)).ok()) << "deleted before Limits::kOutcomeHoldMs ran out";
  for (int step = 0; step < 3'000; ++step) {
    h_->Advance(1);
    if (q().Get(queue, JobRef::ById(job.id)).status().code() == Code::kNotFound) {
      EXPECT_EQ(MustStats(q(), queue).completed, 0);
      return;
    }
  }
  ADD_FAILURE() << "the job kept for its waiters is still there 3 s after Limits::kOutcomeHoldMs ran out";
}

TEST_P(QueueConformance, AnAckWithoutAWaitKeepsNothingWithKeepCompletedZero) {
  const std::string queue = QueueName();
  const Reserved job = EnqueueAndReserve(q(), queue, Job("x"));
  ASSERT_TRUE(q().Ack(queue, AckRequest{job.receipt, "7"}).ok());
  EXPECT_EQ(q().Get(queue, JobRef::ById(job.id)).status().code(), Code::kNotFound);
  EXPECT_EQ(MustStats(q(), queue).completed, 0);
  auto late = q().WaitOutcome(queue, JobRef::ById(job.id), 1'000);
  EXPECT_EQ(late.status().code(), Code::kNotFound) << "a wait that begins after the ack finds nothing to wait for";
}

TEST_P(QueueConformance, AWaitAnswersDeadAtANackThatKillsNotAtOneThatRetries) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("y");
  r.max_attempts = 2;
  const Reserved job = EnqueueAndReserve(q(), queue, r);
  Outcome outcome = WaitOn(q(), queue, JobRef::ById(job.id), kLong);
  h_->AwaitOpenWaits(1);
  ASSERT_TRUE(q().Nack(queue, NackRequest{job.receipt, 0, "first try failed", false}).ok());
  auto again = ReserveEventually(*h_, queue);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(Answered(outcome)) << "a nack that retries is no outcome";
  ASSERT_TRUE(q().Nack(queue, NackRequest{again[0].receipt, 0, "second try failed", false}).ok());
  auto dead = AwaitOutcome(outcome);
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  EXPECT_EQ(dead->state, JobState::kDead);
  EXPECT_EQ(dead->attempt, 2);
  EXPECT_EQ(dead->last_error, "second try failed");
}

TEST_P(QueueConformance, AWaitAnswersCancelledWithTheJobAsItWas) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("reminder");
  r.when.delay_ms = 3'600'000;
  r.headers = {{"h", "v"}};
  const EnqueueResult made = MustEnqueue(q(), queue, r);
  Outcome outcome = WaitOn(q(), queue, JobRef::ById(made.id), kLong);
  h_->AwaitOpenWaits(1);
  ASSERT_TRUE(q().Cancel(queue, JobRef::ById(made.id)).ok());
  auto cancelled = AwaitOutcome(outcome);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(cancelled->id, made.id);
  EXPECT_EQ(cancelled->payload, "reminder");
  EXPECT_EQ(cancelled->headers, (Headers{{"h", "v"}}));
}

// Found by a hostile try: on the embedded store a queue deleted with force left the waits on its
// jobs to their end (then answered cancelled); Redis and PostgreSQL announced it at once.
TEST_P(QueueConformance, AWaitOnAJobOfAQueueDeletedWithForceAnswersCancelledAtOnce) {
  const std::string queue = QueueName();
  const EnqueueResult later = MustEnqueue(q(), queue, Job("later", 3'600'000));
  const Reserved held = EnqueueAndReserve(q(), queue, Job("held"));
  const auto start = std::chrono::steady_clock::now();
  Outcome a = WaitOn(q(), queue, JobRef::ById(later.id), 20'000), b = WaitOn(q(), queue, JobRef::ById(held.id), 20'000);
  h_->AwaitOpenWaits(2);
  auto deleted = q().DeleteQueue(queue, true);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  for (Outcome* f : {&a, &b}) {
    auto outcome = AwaitOutcome(*f);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    EXPECT_EQ(outcome->state, JobState::kCancelled);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "answered at the delete";
}

TEST_P(QueueConformance, AWaitEndsAtItsTimeWithTheJobAsItIs) {
  const std::string queue = QueueName();
  const EnqueueResult made = MustEnqueue(q(), queue, Job("z", 3'600'000));
  const auto start = std::chrono::steady_clock::now();
  auto outcome = q().WaitOutcome(queue, JobRef::ById(made.id), 300);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(outcome->state, JobState::kScheduled);
  EXPECT_GE(waited, std::chrono::milliseconds(300)) << "a state that is not final is answered only at the end";
  auto now = q().WaitOutcome(queue, JobRef::ById(made.id), 0);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->state, JobState::kScheduled) << "wait_ms 0 is a plain read";
}

TEST_P(QueueConformance, AWaitOnAFinalJobAnswersAtOnceAndBadWaitsAreRefused) {
  const std::string queue = QueueName();
  QueueConfig config;
  config.keep_completed_ms = 3'600'000;
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  const Reserved job = EnqueueAndReserve(q(), queue, Job("done"));
  ASSERT_TRUE(q().Ack(queue, AckRequest{job.receipt, "[1,2]"}).ok());
  const auto start = std::chrono::steady_clock::now();
  auto done = q().WaitOutcome(queue, JobRef::ById(job.id), kLong);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "answered at once";
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(done->result, "[1,2]");

  EXPECT_EQ(q().WaitOutcome(queue, JobRef::ById("01HZZZZZZZZZZZZZZZZZZZZZZZ"), 10).status().code(), Code::kNotFound);
  EXPECT_EQ(q().WaitOutcome("conf.no.such.queue", JobRef::ById(job.id), 10).status().code(), Code::kNotFound);
  EXPECT_EQ(q().WaitOutcome(queue, JobRef::ById("not-an-id"), 10).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(q().WaitOutcome(queue, JobRef::ByKey(""), 10).status().code(), Code::kInvalidArgument);
  for (int64_t bad : {int64_t{-1}, Limits::kMaxWaitMs + 1, std::numeric_limits<int64_t>::max(),
                      std::numeric_limits<int64_t>::min()}) {
    auto refused = q().WaitOutcome(queue, JobRef::ById(job.id), bad);
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("wait_ms"), std::string::npos) << refused.status().ToString();
  }
}

TEST_P(QueueConformance, ManyWaitsOnManyJobsEachGetTheirOwnOutcome) {
  const std::string queue = QueueName();
  constexpr int kJobs = 24;
  std::vector<Reserved> jobs;
  for (int i = 0; i < kJobs; ++i) {
    EnqueueRequest r = Job("job-" + std::to_string(i));
    r.max_attempts = 1;
    jobs.push_back({MustEnqueue(q(), queue, r).id, ""});
  }
  std::vector<Outcome> waits, twins;
  for (const auto& j : jobs) waits.push_back(WaitOn(q(), queue, JobRef::ById(j.id), kLong));
  for (int i = 0; i < kJobs; i += 3) twins.push_back(WaitOn(q(), queue, JobRef::ById(jobs[i].id), kLong));
  h_->AwaitOpenWaits(static_cast<int64_t>(waits.size() + twins.size()));
  // A third cancelled, then the rest reserved: half acked with a result, half nacked to death, from
  // two threads at once.
  for (int i = 2; i < kJobs; i += 3) ASSERT_TRUE(q().Cancel(queue, JobRef::ById(jobs[i].id)).ok());
  auto got = ReserveEventually(*h_, queue, kJobs - kJobs / 3);
  std::map<std::string, std::string> receipts;
  for (const auto& d : got) receipts[d.id] = d.receipt;
  auto finish = [&](int parity) {
    for (int i = 0; i < kJobs; ++i) {
      if (i % 3 == 2 || i % 2 != parity) continue;
      const std::string& receipt = receipts[jobs[i].id];
      if (parity == 0) {
        EXPECT_TRUE(q().Ack(queue, AckRequest{receipt, std::to_string(i)}).ok());
      } else {
        EXPECT_TRUE(q().Nack(queue, NackRequest{receipt, 0, "no", false}).ok());
      }
    }
  };
  std::thread other(finish, 1);
  finish(0);
  other.join();
  for (int i = 0; i < kJobs; ++i) {
    auto outcome = AwaitOutcome(waits[static_cast<size_t>(i)]);
    ASSERT_TRUE(outcome.ok()) << i << ": " << outcome.status().ToString();
    EXPECT_EQ(outcome->id, jobs[static_cast<size_t>(i)].id);
    const JobState want = i % 3 == 2 ? JobState::kCancelled : i % 2 == 0 ? JobState::kCompleted : JobState::kDead;
    EXPECT_EQ(outcome->state, want) << i;
    if (want == JobState::kCompleted) {
      EXPECT_EQ(outcome->result, std::to_string(i));
    }
  }
  for (size_t t = 0; t < twins.size(); ++t) {
    auto outcome = AwaitOutcome(twins[t]);
    ASSERT_TRUE(outcome.ok());
    EXPECT_EQ(outcome->id, jobs[t * 3].id) << "two waits on one job both get its outcome";
  }
}

TEST_P(QueueConformance, AWaitCancelledEarlyIsAnsweredAndTheOtherWaitGoesOn) {
  const std::string queue = QueueName();
  const Reserved job = EnqueueAndReserve(q(), queue, Job("w"));
  auto promise = std::make_shared<std::promise<Result<delayq::Job>>>();
  Outcome first = promise->get_future();
  const uint64_t handle = q().WaitOutcomeAsync(queue, JobRef::ById(job.id), kLong,
                                               [promise](Result<delayq::Job> j) { promise->set_value(std::move(j)); });
  Outcome second = WaitOn(q(), queue, JobRef::ById(job.id), kLong);
  h_->AwaitOpenWaits(2);
  q().CancelOutcomeWait(handle);
  EXPECT_EQ(AwaitOutcome(first).status().code(), Code::kUnavailable) << "a wait ended early is answered";
  ASSERT_TRUE(q().Ack(queue, job.receipt).ok());
  auto outcome = AwaitOutcome(second);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(outcome->state, JobState::kCompleted);
}

TEST_P(QueueConformance, ARestartEndsTheWaitsAndAWaitAfterItGetsTheOutcome) {
  const std::string queue = QueueName();
  const Reserved job = EnqueueAndReserve(q(), queue, Job("r"));
  Outcome outcome = WaitOn(q(), queue, JobRef::ById(job.id), kLong);
  h_->AwaitOpenWaits(1);
  h_->Restart();
  auto ended = AwaitOutcome(outcome);
  EXPECT_EQ(ended.status().code(), Code::kUnavailable) << ended.status().ToString();
  // The client waits again; the job's delivery is still current (or ran out and comes again).
  Outcome again = WaitOn(q(), queue, JobRef::ById(job.id), kLong);
  h_->AwaitOpenWaits(1);
  Status acked = q().Ack(queue, AckRequest{job.receipt, "true"});
  if (!acked.ok()) {  // a store that lost the lease over the restart hands the job out again
    auto got = ReserveEventually(*h_, queue);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_TRUE(q().Ack(queue, AckRequest{got[0].receipt, "true"}).ok());
  }
  auto done = AwaitOutcome(again);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(done->result, "true");
}

}  // namespace delayq::testing
