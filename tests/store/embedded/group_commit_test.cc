// GroupCommit (store/embedded/group_commit.h) on its own, over a storage whose log sync this test
// holds, fails and counts: who leads a sync, who is covered by it, what a failed sync answers, and
// the callback form's promises.
#include "store/embedded/group_commit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace delayq {
namespace {

// Only SyncWal is used by GroupCommit; it can be held (until Release) and made to fail.
class SyncOnlyStorage final : public Storage {
 public:
  Status SyncWal() override {
    std::unique_lock lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !held_; });
    ++syncs_;
    return fail_ ? Status::IoError("the disk is gone") : Status::Ok();
  }
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  void Fail(bool fail) {
    std::lock_guard lock(mu_);
    fail_ = fail;
  }
  // Waits (bounded: a guard against a hang) until `n` syncs have begun.
  bool WaitEntered(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_ >= n; });
  }
  int syncs() {
    std::lock_guard lock(mu_);
    return syncs_;
  }

  std::unique_ptr<WriteBatch> NewBatch() override { return nullptr; }
  Status Write(WriteBatch&) override { return Status::Ok(); }
  Status Get(Cf, std::string_view, std::string*) override { return Status::NotFound(""); }
  std::vector<Status> MultiGet(Cf, const std::vector<std::string>& keys, std::vector<std::string>* values) override {
    values->assign(keys.size(), "");
    return std::vector<Status>(keys.size(), Status::NotFound(""));
  }
  std::unique_ptr<Cursor> Scan(Cf, std::string_view, std::string_view) override { return nullptr; }
  uint64_t DiskBytes() override { return 0; }
  bool Healthy(Status*) const override { return true; }
  Status Heal(bool*) override { return Status::Ok(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool fail_ = false;
  int entered_ = 0;
  int syncs_ = 0;
};

TEST(GroupCommit, WhatIsDurableAlreadyNeedsNoSync) {
  SyncOnlyStorage storage;
  GroupCommit commit(&storage);
  EXPECT_TRUE(commit.WaitDurable(0).ok());
  commit.Written(5);
  EXPECT_TRUE(commit.WaitDurable(5).ok());
  EXPECT_EQ(storage.syncs(), 1);
  EXPECT_TRUE(commit.WaitDurable(3).ok()) << "an earlier write is covered by the sync of a later one";
  EXPECT_TRUE(commit.WaitDurable(5).ok());
  EXPECT_EQ(storage.syncs(), 1);
}

// Writers that come while a sync runs wait for it and are then covered by one sync together, not
// one each.
TEST(GroupCommit, WritersThatCameDuringASyncShareTheNext) {
  SyncOnlyStorage storage;
  GroupCommit commit(&storage);
  commit.Written(1);
  storage.Hold();
  auto leader = std::async(std::launch::async, [&] { return commit.WaitDurable(1); });
  ASSERT_TRUE(storage.WaitEntered(1));
  constexpr int kWriters = 8;
  std::vector<std::future<Status>> writers;
  for (int i = 0; i < kWriters; ++i) {
    commit.Written(2 + static_cast<uint64_t>(i));
    writers.push_back(std::async(std::launch::async, [&commit, i] { return commit.WaitDurable(2 + i); }));
  }
  storage.Release();
  EXPECT_TRUE(leader.get().ok());
  for (auto& w : writers) EXPECT_TRUE(w.get().ok());
  EXPECT_LE(storage.syncs(), 2) << "the leader's sync, then one for every writer that came during it";
  EXPECT_GE(commit.syncs(), 2u);
}

// A failed sync answers its error to every caller it was for, and makes nothing durable: the next
// caller syncs again (and, once the disk works, is answered ok).
TEST(GroupCommit, AFailedSyncAnswersItsErrorAndTheNextSyncTriesAgain) {
  SyncOnlyStorage storage;
  GroupCommit commit(&storage);
  commit.Written(1);
  storage.Fail(true);
  Status s = commit.WaitDurable(1);
  EXPECT_EQ(s.code(), Code::kIoError) << s.ToString();
  std::promise<Status> answered;
  commit.WhenDurable(1, [&](Status st) { answered.set_value(st); });
  EXPECT_EQ(answered.get_future().get().code(), Code::kIoError) << "a callback is told the failure too";
  storage.Fail(false);
  EXPECT_TRUE(commit.WaitDurable(1).ok());
  EXPECT_EQ(storage.syncs(), 3);
}

// WhenDurable answers at once what is durable, later what is not, and never before its sync.
TEST(GroupCommit, ACallbackIsAnsweredOnlyOnceItsWriteIsSynced) {
  SyncOnlyStorage storage;
  GroupCommit commit(&storage);
  bool at_once = false;
  commit.WhenDurable(0, [&](Status st) { at_once = st.ok(); });
  EXPECT_TRUE(at_once) << "nothing to wait for: answered on the caller's thread";
  commit.Written(7);
  storage.Hold();
  std::promise<Status> later;
  std::atomic<bool> answered{false};
  commit.WhenDurable(7, [&](Status st) {
    answered = true;
    later.set_value(st);
  });
  ASSERT_TRUE(storage.WaitEntered(1)) << "the syncer thread syncs for the callback";
  EXPECT_FALSE(answered) << "answered while its sync was still running";
  storage.Release();
  EXPECT_TRUE(later.get_future().get().ok());
  EXPECT_EQ(storage.syncs(), 1);
}

// Stop answers the callbacks still queued (after their sync), and a callback given after Stop is
// synced by its caller.
TEST(GroupCommit, StopAnswersEveryQueuedCallback) {
  SyncOnlyStorage storage;
  GroupCommit commit(&storage);
  constexpr int kCallbacks = 50;
  std::atomic<int> ok{0};
  storage.Hold();
  for (int i = 1; i <= kCallbacks; ++i) {
    commit.Written(static_cast<uint64_t>(i));
    commit.WhenDurable(static_cast<uint64_t>(i), [&](Status st) { ok += st.ok() ? 1 : 0; });
  }
  ASSERT_TRUE(storage.WaitEntered(1));
  std::thread stopper([&] { commit.Stop(); });
  storage.Release();
  stopper.join();
  EXPECT_EQ(ok, kCallbacks);
  commit.Written(kCallbacks + 1);
  bool after = false;
  commit.WhenDurable(kCallbacks + 1, [&](Status st) { after = st.ok(); });
  EXPECT_TRUE(after) << "after Stop, the caller syncs itself";
}

// In interval mode unsynced writes are synced without anyone waiting.
TEST(GroupCommit, TheIntervalThreadSyncsWritesNoOneWaitsFor) {
  SyncOnlyStorage storage;
  GroupCommit commit(&storage);
  commit.StartInterval(1);
  commit.Written(3);
  EXPECT_TRUE(storage.WaitEntered(1)) << "no interval sync within 10 s";
  commit.Stop();
  EXPECT_GE(storage.syncs(), 1);
}

}  // namespace
}  // namespace delayq
