// The conformance suite for the Queue interface. Every store runs it unchanged: a store's test
// binary compiles queue_conformance.cc and instantiates the suite with its harness factory:
//
//   INSTANTIATE_TEST_SUITE_P(Engine, QueueConformance,
//                            ::testing::Values(HarnessFactory{"sync", [] { ... }}),
//                            HarnessName);
//
// Time: a harness either moves a manual clock (exact_time() == true: the suite also checks
// the exact millisecond boundaries) or lets real time pass (then it checks that every job
// arrived at or after its due time, on the store's clock).
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "delayq/queue.h"

namespace delayq::testing {

class QueueHarness {
 public:
  virtual ~QueueHarness() = default;
  virtual Queue& queue() = 0;
  // The store's clock, in ms since the epoch.
  virtual int64_t NowMs() = 0;
  // Lets `ms` of the store's time pass (advancing a manual clock, or waiting on a real one).
  virtual void Advance(int64_t ms) = 0;
  // True when Advance moves a manual clock: nothing else moves time.
  virtual bool exact_time() const = 0;
  // A time unit for delays in the suite: large enough that a real clock does not pass it
  // between two calls of one test step.
  virtual int64_t unit_ms() const { return exact_time() ? 1000 : 300; }
  // False for a queue split into shards: order holds within a shard only, so the suite checks
  // that every job arrives, not in which order.
  virtual bool ordered() const { return true; }
  // True where ready jobs of the default group at priority 0 are handed out in the order they
  // became ready rather than by due time (the Redis store's stream: a replayed job goes last).
  // docs/http-api.md documents the exception; lanes_conformance.cc holds each store to its rule.
  virtual bool ready_in_arrival_order() const { return false; }
  // Stops the store and opens it again on the same data; queue() is the new one afterwards. The
  // embedded store closes and reopens its directory (its kill -9 is crash_test's); a Redis store
  // is replaced by a new one on the same Redis; a server is killed with SIGKILL and started again.
  virtual void Restart() = 0;
  // Returns once at least `n` waits (waiting reserves and waits for an outcome) are open where the
  // store runs: at once for a store in this process (WaitOutcomeAsync registers before it
  // returns); a server's /metrics is read until it shows them.
  virtual void AwaitOpenWaits(int64_t /*n*/) {}
  // CPU seconds (user + system) the process that runs the store has used so far: this process
  // for a store opened in it, the server's for a store behind HTTP.
  virtual double StoreCpuSeconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
};

struct HarnessFactory {
  std::string name;
  std::function<std::unique_ptr<QueueHarness>()> make;
};

// What GoogleTest prints for GetParam(): the harness name, not the struct's bytes.
inline void PrintTo(const HarnessFactory& f, std::ostream* os) { *os << f.name; }

inline std::string HarnessName(const ::testing::TestParamInfo<HarnessFactory>& info) { return info.param.name; }

class QueueConformance : public ::testing::TestWithParam<HarnessFactory> {
 protected:
  void SetUp() override { h_ = GetParam().make(); }
  void TearDown() override { h_.reset(); }
  Queue& q() { return h_->queue(); }
  std::unique_ptr<QueueHarness> h_;
};

// For a store opened with max_queues = 3 and no queue yet: the fourth queue is refused
// (kResourceExhausted) by every way of creating one, and nothing else changes. Each store's own
// test opens it so and calls this.
void ExpectTheQueueLimitHolds(Queue& q);

}  // namespace delayq::testing
