// Recurring schedules for any store: ScheduledQueue wraps a store (a Queue, or an Engine) and
// answers the Queue interface's schedule calls with a ScheduleRunner (schedule/runner.h) over the
// store's ScheduleStore rows and a clock; every other call goes to the store. A config change is
// checked against the queue's schedules first (a config must not refuse their runs).
//
// Composed where a store is opened (Engine::Open, server/store.cc): a new store gets schedules by
// implementing the small ScheduleStore interface. The wrapper owns the store, and its runner is
// stopped before the store closes or goes (the runner's thread calls the store).
#pragma once

#include <memory>
#include <utility>

#include "core/validate.h"
#include "delayq/clock.h"
#include "schedule/forwarding_queue.h"
#include "schedule/runner.h"
#include "schedule/schedule_store.h"

namespace delayq {

template <typename Base>
class ScheduledQueue : public ForwardingQueue<Base> {
 public:
  // Starts the runner: `store` is open and recovered, and `rows` lives as long as it.
  ScheduledQueue(std::unique_ptr<Base> store, ScheduleStore& rows, std::shared_ptr<Clock> clock,
                 ScheduleRunnerOptions options = {})
      : ForwardingQueue<Base>(*store), store_(std::move(store)), runner_(*store_, rows, std::move(clock), options) {
    runner_.Start();
  }
  ~ScheduledQueue() override { runner_.Stop(); }

  Result<RecurringSchedule> PutSchedule(std::string_view q, const ScheduleSpec& spec) override {
    return runner_.Put(q, spec);
  }
  Result<RecurringSchedule> GetSchedule(std::string_view q, std::string_view name) override {
    return runner_.Get(q, name);
  }
  Result<std::vector<RecurringSchedule>> ListSchedules(std::string_view q) override { return runner_.List(q); }
  Status DeleteSchedule(std::string_view q, std::string_view name) override { return runner_.Delete(q, name); }
  Result<RecurringSchedule> PauseSchedule(std::string_view q, std::string_view name, bool paused) override {
    return runner_.SetPaused(q, name, paused);
  }
  Status SetConfig(std::string_view q, const QueueConfig& config) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(q));  // refusals keep their order: the request first,
    DELAYQ_RETURN_IF_ERROR(ValidateConfig(config));
    DELAYQ_RETURN_IF_ERROR(runner_.CheckConfig(q, config));  // then its schedules' runs must still fit
    return store_->SetConfig(q, config);
  }

  // Stops the runner (idempotent): before the store closes.
  void StopSchedules() { runner_.Stop(); }
  Base& store() { return *store_; }
  ScheduleRunner& runner() { return runner_; }

 private:
  std::unique_ptr<Base> store_;  // declared first: goes after the runner
  ScheduleRunner runner_;
};

}  // namespace delayq
