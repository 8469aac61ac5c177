// A Storage wrapper that fails writes, syncs and reads on demand: the fault seam for tests of error
// paths ("nothing half-applied, a clear error returned").
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "store/embedded/storage.h"

namespace delayq {

class FaultyStorage final : public Storage {
 public:
  explicit FaultyStorage(std::unique_ptr<Storage> base) : base_(std::move(base)) {}

  // The next `n` writes (or syncs) fail with kIoError and change nothing.
  void FailWrites(int n) { fail_writes_ = n; }
  void FailSyncs(int n) { fail_syncs_ = n; }
  // After `skip` more reads (Get or MultiGet calls) succeed, the next `n` fail with kIoError.
  void FailReads(int n, int skip = 0) {
    skip_reads_ = skip;
    fail_reads_ = n;
  }
  int writes() const { return writes_; }
  // Syncs wait while held (a slow disk), until ReleaseSyncs; syncs_started() counts them.
  void HoldSyncs() {
    std::lock_guard lock(hold_mu_);
    held_ = true;
  }
  // Notifies under the lock: a released sync may let the owner destroy this at once.
  void ReleaseSyncs() {
    std::lock_guard lock(hold_mu_);
    held_ = false;
    hold_cv_.notify_all();
  }
  int syncs_started() const { return syncs_started_; }

  std::unique_ptr<WriteBatch> NewBatch() override { return base_->NewBatch(); }
  Status Write(WriteBatch& batch) override {
    ++writes_;
    if (fail_writes_.load() > 0) {
      --fail_writes_;
      return Status::IoError("writing to the store: injected fault (No space left on device)");
    }
    return base_->Write(batch);
  }
  Status SyncWal() override {
    ++syncs_started_;
    {
      std::unique_lock lock(hold_mu_);
      hold_cv_.wait(lock, [this] { return !held_; });
    }
    if (fail_syncs_.load() > 0) {
      --fail_syncs_;
      return Status::IoError("syncing the write-ahead log: injected fault (Input/output error)");
    }
    return base_->SyncWal();
  }
  Status Get(Cf cf, std::string_view key, std::string* value) override {
    if (ReadFails()) return ReadFault();
    return base_->Get(cf, key, value);
  }
  std::vector<Status> MultiGet(Cf cf, const std::vector<std::string>& keys, std::vector<std::string>* values) override {
    if (ReadFails()) {
      values->assign(keys.size(), {});
      return std::vector<Status>(keys.size(), ReadFault());
    }
    return base_->MultiGet(cf, keys, values);
  }
  std::unique_ptr<Cursor> Scan(Cf cf, std::string_view lower, std::string_view upper) override {
    return base_->Scan(cf, lower, upper);
  }
  uint64_t DiskBytes() override { return base_->DiskBytes(); }
  bool Healthy(Status* why = nullptr) const override { return base_->Healthy(why); }
  Status Heal(bool* reopened) override { return base_->Heal(reopened); }

 private:
  bool ReadFails() {
    if (fail_reads_.load() <= 0) return false;
    if (skip_reads_.load() > 0) {
      --skip_reads_;
      return false;
    }
    --fail_reads_;
    return true;
  }
  static Status ReadFault() { return Status::IoError("reading the store: injected fault (Input/output error)"); }

  std::unique_ptr<Storage> base_;
  std::atomic<int> fail_writes_{0}, fail_syncs_{0}, writes_{0}, syncs_started_{0}, fail_reads_{0}, skip_reads_{0};
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  bool held_ = false;
};

}  // namespace delayq
