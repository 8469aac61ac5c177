// A consumer loop: runs a handler on each job of a queue, with up to `concurrency` jobs in
// flight. The handler returning acks the job; throwing nacks it (the exception's what() becomes
// last_error, the queue's back-off decides the retry). While a handler runs, its lease is kept
// alive with touches, so a long job is not handed to someone else.
//
//   delayq::Worker worker(*queue, "orders", [](const delayq::Delivery& job) { Cancel(job); },
//                         {.concurrency = 8});
//   worker.Start();  ...  worker.Stop();   // finishes the jobs in flight, then returns
//
// Threads. Start() starts `concurrency` threads; each reserves one job at a time and runs the
// handler for it on itself, so up to `concurrency` handlers run at once, each on its own thread
// (a handler must be thread-safe when concurrency > 1; one job's handler runs on one thread from
// start to end). One more thread touches the leases of the jobs in flight every third of the
// lease (WorkerOptions::lease_ms, or the queue's). on_error runs on whichever of these threads
// met the error. Stop() and the destructor may be called from any other thread, not from a
// handler (they wait for the handlers). `queue` must outlive the Worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "delayq/queue.h"

namespace delayq {

struct WorkerOptions {
  int concurrency = 1;              // jobs in flight at once
  std::optional<int64_t> lease_ms;  // default: the queue's lease_ms (read again as it changes)
  int64_t wait_ms = 20'000;         // long-poll wait of each reserve
  // Called when the store answers an error (reserve, ack, nack); default: log to stderr.
  std::function<void(const Status&)> on_error;
};

struct WorkerStats {
  uint64_t acked = 0, nacked = 0, errors = 0;
};

class Worker {
 public:
  using Handler = std::function<void(const Delivery&)>;
  Worker(Queue& queue, std::string queue_name, Handler handler, WorkerOptions options = {});
  ~Worker();  // Stop()

  void Start();
  // Stops taking jobs, waits for the handlers in flight to finish (their jobs are acked or
  // nacked as usual), and returns. Idempotent.
  void Stop();
  WorkerStats stats() const;

 private:
  void Loop();
  void KeepAlive();
  void Report(const Status& s);

  Queue& queue_;
  const std::string name_;
  const Handler handler_;
  const WorkerOptions options_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
  std::thread keepalive_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::string> in_flight_;  // slot -> receipt of the job its handler runs
  std::map<uint64_t, uint64_t> waiting_;       // slot -> handle of its waiting reserve
  WorkerStats stats_;
};

}  // namespace delayq
