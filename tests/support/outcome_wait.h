// A wait for an outcome started from a test (Queue::WaitOutcomeAsync), answered into a future.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>

#include "delayq/queue.h"

namespace delayq::testing {

using Outcome = std::future<Result<delayq::Job>>;

// Starts a wait; the future is ready when it is answered.
inline Outcome WaitOn(Queue& q, const std::string& queue, const JobRef& ref, int64_t wait_ms = 60'000) {
  auto promise = std::make_shared<std::promise<Result<delayq::Job>>>();
  auto future = promise->get_future();
  q.WaitOutcomeAsync(queue, ref, wait_ms, [promise](Result<delayq::Job> job) { promise->set_value(std::move(job)); });
  return future;
}

// Its answer. A guard against a hang, not a synchronisation: the answer is awaited on the future.
inline Result<delayq::Job> AwaitOutcome(Outcome& f) {
  if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within 30 s";
    std::abort();
  }
  return f.get();
}

}  // namespace delayq::testing
