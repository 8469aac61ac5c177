// A delayq-check worker: one client, in its own process (so that a fault can kill it with
// SIGKILL), issuing a random mix of every operation until its end time or SIGTERM, and
// recording each one in its history file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace delayq::check {

struct WorkerOptions {
  int id = 0;
  uint64_t seed = 1;
  std::vector<std::string> urls;    // servers to talk to (one is picked per connection)
  std::vector<std::string> queues;  // the queues of the run
  std::string history;              // the file to append to
  int64_t until_us = 0;             // wall-clock end
  bool admin = false;               // pause/resume, config, dead letters; else produce and consume
  int64_t max_delay_ms = 5000;
  // How long a request may go unanswered (a reserve: its wait_ms more) before the worker stops
  // waiting and records it as "no_answer": the `answered` invariant's limit, enforced by the
  // client, so that a server that drops an answer is a verdict, not a hang.
  int64_t answer_within_ms = kAnswerWithinMs;
  static constexpr int64_t kAnswerWithinMs = 5'000;
};

// The queue config every run starts from (short leases and back-off, so that expiry,
// redelivery and dead letters happen within seconds).
struct StartConfig {
  static constexpr int kMaxAttempts = 3;
  static constexpr int64_t kLeaseMs = 2000;
  // One queue keeps its acked jobs completed, with the results the acks carry (an hour: longer
  // than a run), so the faulted runs check them; the others delete them at the ack.
  static int64_t KeepCompletedMs(const std::string& queue) { return queue == "chk.b" ? 3'600'000 : 0; }
};

// Runs until the end time or SIGTERM; returns the process exit code.
int RunWorker(const WorkerOptions& options);

}  // namespace delayq::check
