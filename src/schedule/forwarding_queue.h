// A Queue (or an interface built on it, such as Engine) that hands every call to another: the
// base of decorators that change a few calls and pass the rest on (ScheduledQueue).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/queue.h"

namespace delayq {

template <typename Base>
class ForwardingQueue : public Base {
 public:
  explicit ForwardingQueue(Base& inner) : inner_(inner) {}

  Result<EnqueueResult> Enqueue(std::string_view q, const EnqueueRequest& r) override { return inner_.Enqueue(q, r); }
  Result<std::vector<EnqueueResult>> EnqueueBatch(std::string_view q, std::span<const EnqueueRequest> r) override {
    return inner_.EnqueueBatch(q, r);
  }
  void EnqueueAsync(std::string_view q, const EnqueueRequest& r, EnqueueOneCallback done) override {
    inner_.EnqueueAsync(q, r, std::move(done));
  }
  void EnqueueBatchAsync(std::string_view q, std::span<const EnqueueRequest> r, EnqueueCallback done) override {
    inner_.EnqueueBatchAsync(q, r, std::move(done));
  }
  Result<Job> Get(std::string_view q, const JobRef& ref) override { return inner_.Get(q, ref); }
  Status Cancel(std::string_view q, const JobRef& ref) override { return inner_.Cancel(q, ref); }
  Result<Job> Reschedule(std::string_view q, const JobRef& ref, const When& when) override {
    return inner_.Reschedule(q, ref, when);
  }
  void CancelAsync(std::string_view q, const JobRef& ref, CancelCallback done) override {
    inner_.CancelAsync(q, ref, std::move(done));
  }
  void RescheduleAsync(std::string_view q, const JobRef& ref, const When& when, JobCallback done) override {
    inner_.RescheduleAsync(q, ref, when, std::move(done));
  }
  uint64_t WaitOutcomeAsync(std::string_view q, const JobRef& ref, int64_t wait_ms, JobCallback done) override {
    return inner_.WaitOutcomeAsync(q, ref, wait_ms, std::move(done));
  }
  void CancelOutcomeWait(uint64_t handle) override { inner_.CancelOutcomeWait(handle); }
  Result<std::vector<Delivery>> Reserve(std::string_view q, const ReserveRequest& r) override {
    return inner_.Reserve(q, r);
  }
  uint64_t ReserveAsync(std::string_view q, const ReserveRequest& r, ReserveCallback done) override {
    return inner_.ReserveAsync(q, r, std::move(done));
  }
  void CancelReserve(uint64_t handle) override { inner_.CancelReserve(handle); }
  using Queue::AckBatch;
  using Queue::AckBatchAsync;
  std::vector<Status> AckBatch(std::string_view q, std::span<const AckRequest> requests) override {
    return inner_.AckBatch(q, requests);
  }
  void AckBatchAsync(std::string_view q, std::span<const AckRequest> requests, AckCallback done) override {
    inner_.AckBatchAsync(q, requests, std::move(done));
  }
  std::vector<Status> ReleaseBatch(std::string_view q, std::span<const std::string> receipts) override {
    return inner_.ReleaseBatch(q, receipts);
  }
  Result<NackResult> Nack(std::string_view q, const NackRequest& r) override { return inner_.Nack(q, r); }
  using Queue::Touch;
  Result<TouchResult> Touch(std::string_view q, const TouchRequest& r) override { return inner_.Touch(q, r); }
  void NackAsync(std::string_view q, const NackRequest& r, NackCallback done) override {
    inner_.NackAsync(q, r, std::move(done));
  }
  void TouchAsync(std::string_view q, const TouchRequest& r, TouchCallback done) override {
    inner_.TouchAsync(q, r, std::move(done));
  }
  Result<JobPage> ListJobs(std::string_view q, const ListRequest& r) override { return inner_.ListJobs(q, r); }
  Result<int64_t> ReplayDead(std::string_view q, std::span<const std::string> ids) override {
    return inner_.ReplayDead(q, ids);
  }
  Result<int64_t> PurgeDead(std::string_view q) override { return inner_.PurgeDead(q); }
  Result<QueueStats> Stats(std::string_view q) override { return inner_.Stats(q); }
  Result<std::vector<QueueStats>> ListQueues() override { return inner_.ListQueues(); }
  Result<ScheduleHistogram> Schedule(std::string_view q, int64_t bucket_ms, int32_t buckets) override {
    return inner_.Schedule(q, bucket_ms, buckets);
  }
  Result<QueueConfig> GetConfig(std::string_view q) override { return inner_.GetConfig(q); }
  Status SetConfig(std::string_view q, const QueueConfig& c) override { return inner_.SetConfig(q, c); }
  Result<int64_t> DeleteQueue(std::string_view q, bool force) override { return inner_.DeleteQueue(q, force); }
  Status Pause(std::string_view q) override { return inner_.Pause(q); }
  Status Resume(std::string_view q) override { return inner_.Resume(q); }
  Result<RecurringSchedule> PutSchedule(std::string_view q, const ScheduleSpec& spec) override {
    return inner_.PutSchedule(q, spec);
  }
  Result<RecurringSchedule> GetSchedule(std::string_view q, std::string_view name) override {
    return inner_.GetSchedule(q, name);
  }
  Result<std::vector<RecurringSchedule>> ListSchedules(std::string_view q) override { return inner_.ListSchedules(q); }
  Status DeleteSchedule(std::string_view q, std::string_view name) override { return inner_.DeleteSchedule(q, name); }
  Result<RecurringSchedule> PauseSchedule(std::string_view q, std::string_view name, bool paused) override {
    return inner_.PauseSchedule(q, name, paused);
  }
  Status Health() override { return inner_.Health(); }

 protected:
  Base& inner() { return inner_; }
  const Base& inner() const { return inner_; }

 private:
  Base& inner_;
};

}  // namespace delayq
