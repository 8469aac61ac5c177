// OutcomeWaiters on its own, with a store faked by its hooks: what the conformance suite cannot
// provoke on a real store (a read that fails after a notice).
#include "core/outcome_waiters.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace delayq {
namespace {

// A store of one job whose state and read failures the test sets.
class FakeStore {
 public:
  void Set(JobState state) {
    std::lock_guard lock(mu_);
    job_.state = state;
  }
  void Delete() {
    std::lock_guard lock(mu_);
    gone_ = true;
  }
  void FailReads(int n) {
    std::lock_guard lock(mu_);
    failures_ = n;
  }
  int reads() const {
    std::lock_guard lock(mu_);
    return reads_;
  }
  // Wait's second read waits for the waiters' thread to read first: how a slow machine orders them.
  void HoldWaitsSecondRead() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  OutcomeWaiters::Hooks Hooks() {
    return {[this](std::string_view, const JobRef&) -> Result<Job> {
              std::unique_lock lock(mu_);
              const bool on_test_thread = std::this_thread::get_id() == test_thread_;
              ++reads_;
              if (on_test_thread && hold_ && reads_ == 2) {
                --reads_;  // counted when it goes on
                read_elsewhere_.wait(lock, [this] { return reads_elsewhere_ > 0; });
                ++reads_;
              }
              if (!on_test_thread) {
                ++reads_elsewhere_;
                read_elsewhere_.notify_all();
              }
              // Wait's own reads (on the test's thread) succeed; the waiters' thread's reads fail.
              // Not "after the second read": TSan in CI slowed Wait enough for a 1 ms wait to come
              // due, and be read by the waiters' thread, before Wait's second read.
              if (failures_ > 0 && !on_test_thread) {
                --failures_;
                return Status::Unavailable("the store is unreachable");
              }
              if (gone_) return Status::NotFound("no such job");
              return job_;
            },
            nullptr};
  }

 private:
  mutable std::mutex mu_;
  Job job_ = [] {
    Job j;
    j.id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    j.state = JobState::kReserved;
    return j;
  }();
  std::condition_variable read_elsewhere_;
  const std::thread::id test_thread_ = std::this_thread::get_id();
  bool hold_ = false;
  int reads_elsewhere_ = 0;
  int failures_ = 0;
  int reads_ = 0;
  bool gone_ = false;
};

std::future<Result<Job>> StartWait(OutcomeWaiters& waiters, int64_t wait_ms) {
  auto promise = std::make_shared<std::promise<Result<Job>>>();
  auto future = promise->get_future();
  waiters.Wait("q", JobRef::ById("01ARZ3NDEKTSV4RRFFQ69G5FAV"), wait_ms,
               [promise](Result<Job> job) { promise->set_value(std::move(job)); });
  return future;
}

// A guard against a hang, not a synchronisation.
Result<Job> Answer(std::future<Result<Job>>& f) {
  if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within 20 s";
    return Status::Internal("no answer");
  }
  return f.get();
}

TEST(OutcomeWaiters, ANoticeWhoseReadFailsIsReadAgainNotLeftToTheWaitsEnd) {
  FakeStore store;
  OutcomeWaiters waiters(store.Hooks());
  auto outcome = StartWait(waiters, 60'000);  // longer than the guard: only a read answers
  store.Set(JobState::kCompleted);
  store.FailReads(3);
  waiters.Notify("q", "01ARZ3NDEKTSV4RRFFQ69G5FAV", JobState::kCompleted);
  auto got = Answer(outcome);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->state, JobState::kCompleted);
  EXPECT_GE(store.reads(), 2 + 3 + 1);  // Wait's two, the failed three, the one that answered
}

// A store's notices may be lost (a subscription not yet taken, or reconnecting): it asks for a
// recheck, and a job found gone then was cancelled. CI saw such a wait run to its end on Redis (the
// cancel published before the new store's PSUBSCRIBE was taken).
TEST(OutcomeWaiters, AJobARecheckFindsGoneIsAnsweredCancelledAsLastSeen) {
  FakeStore store;
  OutcomeWaiters waiters(store.Hooks());
  auto outcome = StartWait(waiters, 60'000);  // longer than the guard: only the recheck answers
  store.Delete();                             // cancelled, its notice lost
  waiters.Recheck();
  auto got = Answer(outcome);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->state, JobState::kCancelled);
  EXPECT_EQ(got->id, "01ARZ3NDEKTSV4RRFFQ69G5FAV");
}

TEST(OutcomeWaiters, AWaitDueWhileItsStoreFailsIsAnsweredWithTheFailure) {
  FakeStore store;
  OutcomeWaiters waiters(store.Hooks());
  store.FailReads(1'000'000);
  store.HoldWaitsSecondRead();  // the order CI's TSan run met: the wait due before Wait read again
  auto outcome = StartWait(waiters, 1);
  auto got = Answer(outcome);
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().ToString();
}

TEST(OutcomeWaiters, ANoticeForAJobNoOneWaitsForReadsNothing) {
  FakeStore store;
  OutcomeWaiters waiters(store.Hooks());
  waiters.Notify("q", "01ARZ3NDEKTSV4RRFFQ69G5FAV", JobState::kCompleted);
  waiters.Recheck();
  EXPECT_EQ(store.reads(), 0);
  EXPECT_FALSE(waiters.any());
}

TEST(OutcomeWaiters, CloseAnswersEveryOpenWaitAndRefusesLaterOnes) {
  FakeStore store;
  OutcomeWaiters waiters(store.Hooks());
  auto first = StartWait(waiters, 60'000);
  waiters.Close();
  EXPECT_EQ(Answer(first).status().code(), Code::kUnavailable);
  auto later = StartWait(waiters, 60'000);
  EXPECT_EQ(Answer(later).status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace delayq
