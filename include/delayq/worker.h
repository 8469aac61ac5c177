// A consumer loop: runs a handler on each job of a queue, with up to `concurrency` jobs in
// flight. The handler returning acks the job; throwing nacks it (the exception's what() becomes
// last_error, the queue's back-off decides the retry). A handler that returns a std::string
// returns the job's result, JSON text (AckRequest::result; empty: none), kept with the job while
// the queue keeps completed jobs (QueueConfig::keep_completed_ms):
//
//   delayq::Worker worker(*queue, "orders", [](const delayq::Delivery& job) -> std::string {
//     return R"({"charged": 1999})";
//   }); While a handler runs, its lease is kept
// alive with touches, so a long job is not handed to someone else.
//
//   delayq::Worker worker(*queue, "orders", [](const delayq::Delivery& job) { Cancel(job); },
//                         {.concurrency = 8});
//   worker.Start();  ...  worker.Stop();   // finishes the jobs in flight, then returns
//
// Jobs come by a push stream when `queue` is a delayq::Client (HTTP) and WorkerOptions::stream
// is on (the default): the server sends each job as it comes due, at most concurrency +
// prefetch unacknowledged at a time, and acks go back in batches (one request per ack_delay_ms
// at most). Any other Queue (the embedded engine), stream off, or a server without streams
// (404) gets long-polled reserves. A broken stream (or one whose server stopped) is opened again
// after a second, and what it had prefetched and not started is given back (ReleaseBatch: no
// attempt used). A job the server hands out again while its handler still runs here (the stream
// broke: the server took its deliveries back) is not run twice: the running handler's outcome
// settles the new delivery.
//
// Threads. Start() starts `concurrency` threads; each takes one job at a time and runs the
// handler for it on itself, so up to `concurrency` handlers run at once, each on its own thread
// (a handler must be thread-safe when concurrency > 1; one job's handler runs on one thread from
// start to end). One more thread touches the leases of the jobs in flight every third of the
// lease (WorkerOptions::lease_ms, or the queue's). on_error runs on whichever of these threads
// met the error. With a stream, one thread reads it and one sends the acks. Stop() and the
// destructor may be called from any other thread, not from a handler (they wait for the
// handlers). `queue` must outlive the Worker.
#pragma once

#include <atomic>
#include <concepts>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "delayq/queue.h"

namespace delayq {

class Client;
class StreamCancel;

struct WorkerOptions {
  int concurrency = 1;              // jobs in flight at once
  std::optional<int64_t> lease_ms;  // default: the queue's lease_ms (read again as it changes)
  int64_t wait_ms = 20'000;         // long-poll wait of each reserve
  // Called when the store answers an error (reserve, ack, nack); default: log to stderr.
  std::function<void(const Status&)> on_error;
  bool stream = true;        // with a Client: jobs by a push stream (see above)
  int prefetch = -1;         // stream deliveries taken ahead of a free handler; -1: concurrency
  int64_t ack_delay_ms = 2;  // a stream's acks go in one request per this long at most
};

struct WorkerStats {
  uint64_t acked = 0, nacked = 0, errors = 0;
};

class Worker {
 public:
  using Handler = std::function<void(const Delivery&)>;
  // A handler that returns the job's result (JSON text; empty: none).
  using ResultHandler = std::function<std::string(const Delivery&)>;
  // `handler` returns void, or the job's result as a std::string.
  template <typename F>
  requires std::invocable<F&, const Delivery&> Worker(Queue& queue, std::string queue_name, F handler,
                                                      WorkerOptions options = {})
      : Worker(queue, std::move(queue_name), Results(std::move(handler)), std::move(options), 0) {}
  ~Worker();  // Stop()

  void Start();
  // Stops taking jobs, waits for the handlers in flight to finish (their jobs are acked or
  // nacked as usual), and returns. Idempotent.
  void Stop();
  WorkerStats stats() const;
  // True once Stop() began: a long handler may check it to cut its work short.
  bool stopping() const { return stopping_; }
  // True while jobs come by a stream; false with reserves.
  bool streaming() const { return streaming_; }
  // From a handler: reports how far it has got with `job` (progress_json: any JSON value of at
  // most Limits::kMaxProgress bytes), shown on the job while it runs (Job::progress); touches its
  // lease too. kInvalidArgument when the job's handler is not running here; else Touch's errors.
  Status Progress(const Delivery& job, std::string progress_json);

 private:
  struct Streamed {
    uint64_t generation;  // of the stream it came on
    Delivery job;
  };
  Worker(Queue& queue, std::string queue_name, ResultHandler handler, WorkerOptions options, int);
  template <typename F>
  static ResultHandler Results(F handler) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, const Delivery&>>) {
      return [h = std::move(handler)](const Delivery& d) mutable {
        h(d);
        return std::string();
      };
    } else {
      return [h = std::move(handler)](const Delivery& d) mutable { return std::string(h(d)); };
    }
  }
  void Loop();
  void ReserveOnce(uint64_t slot);
  void TakeStreamed(uint64_t slot);
  void StartLocked(uint64_t slot, const Delivery& job);
  void Handle(uint64_t slot, const Delivery& job, bool batched);
  void ReadStream();
  bool Redelivered(const Delivery& d);
  // False (nothing queued) when `window` unstarted deliveries already wait.
  bool QueueDelivery(uint64_t generation, const Delivery& d, size_t window);
  void GiveBack(bool final);
  void SendAcks();
  std::vector<Status> AckInParts(std::span<const AckRequest> batch);
  void KeepAlive();
  void Report(const Status& s);

  Queue& queue_;
  const std::string name_;
  const ResultHandler handler_;
  const WorkerOptions options_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
  std::thread keepalive_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::string> in_flight_;  // slot -> receipt of the job its handler runs (the newest)
  std::map<std::string, uint64_t> running_;    // job id -> the slot whose handler runs it
  std::map<uint64_t, uint64_t> waiting_;       // slot -> handle of its waiting reserve
  WorkerStats stats_;
  // The stream, when `queue_` is a Client and options_.stream: its reader and acker threads,
  // what it delivered and no handler started, and the receipts waiting for the next ack batch.
  std::atomic<bool> streaming_{false};
  Client* client_ = nullptr;
  std::unique_ptr<StreamCancel> stream_cancel_;
  std::thread reader_, acker_;
  std::deque<Streamed> inbox_;
  std::unordered_map<std::string, Streamed*> queued_;  // job id -> its entry in inbox_
  uint64_t generation_ = 0;                            // of the stream open now; older deliveries were given back
  std::vector<AckRequest> acks_;
  std::vector<std::pair<std::string, int64_t>> unstarted_;  // receipt, lease deadline: to give back
  bool handlers_done_ = false;
  std::condition_variable acks_cv_;
  // The slots wait on their own: one delivery wakes one slot, never the keep-alive thread in its
  // stead (a notify_one on cv_ could, and the job then sat in inbox_ until the next one came).
  std::condition_variable inbox_cv_;
};

}  // namespace delayq
