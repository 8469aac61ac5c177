// EngineImpl::Op: how every operation of the embedded engine takes the lock, catches up with
// time, writes and waits for durability. Included by engine_impl.h after the class.
#pragma once

#include <functional>
#include <mutex>

namespace delayq {

// One operation on the engine, from its first line to its answer. Construction marks a
// writing operation in flight for the group commit, takes the lock, reads both clocks and
// catches up with them (Tick). Finish() — or the end of the scope, on every early return —
// releases the lock, leaves the group commit's in-flight set and runs the answers collected
// for waiting reserves; Finish() then waits until the operation's write is durable.
//
//   Op op(*this, Op::kWrites);
//   DELAYQ_RETURN_IF_ERROR(op.status());  // the store is closed
//   ... read, plan a batch, op.Write(*batch), apply to memory ...
//   return op.Finish();
class EngineImpl::Op {
 public:
  enum Kind { kReads, kWrites };
  Op(EngineImpl& engine, Kind kind);
  ~Op() { Unlock(); }
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  // Not ok when the store is closed: the operation must return it.
  const Status& status() const { return status_; }
  const Instant& now() const { return now_; }
  Deferred& deferred() { return deferred_; }
  // Writes the batch (unsynced); Finish waits for it to be durable.
  Status Write(WriteBatch& batch);
  // Ends the locked part, runs the collected answers, and waits for durability.
  Status Finish();
  // The same, without waiting: `done` is called once the writes are durable (see
  // GroupCommit::WhenDurable), maybe before this returns.
  void FinishAsync(std::function<void(Status)> done);
  // Ends the locked part and runs the collected answers (idempotent).
  void Unlock();

 private:
  EngineImpl& engine_;
  Deferred deferred_;  // destroyed last: runs after the lock is released
  GroupCommit::InFlight in_flight_;
  std::unique_lock<std::mutex> lock_;
  int64_t locked_at_ns_ = 0;
  Instant now_;
  Status status_;
  uint64_t seq_ = 0;
};

// Finishes `op` for a result of the locked part: `done` gets it once the write is durable (or
// the error at once).
template <typename T>
void EngineImpl::FinishWith(Op& op, Result<T> result, std::function<void(Result<T>)> done) {
  if (!result.ok()) {
    op.Unlock();
    return done(std::move(result));
  }
  op.FinishAsync([done = std::move(done), result = std::move(result)](Status durable) mutable {
    if (!durable.ok()) return done(durable);
    done(std::move(result));
  });
}

}  // namespace delayq
