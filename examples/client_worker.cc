// The README's C++ example: enqueue an order's timeout on a server, and a Worker that cancels the
// order when it comes due. Needs only delayq::client (HTTP; no RocksDB).
//   client_worker [http://127.0.0.1:7070]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "delayq/client.h"
#include "delayq/worker.h"

int main(int argc, char** argv) {
  auto queue = delayq::Client::Connect(argc > 1 ? argv[1] : "http://127.0.0.1:7070");
  if (!queue.ok()) {
    std::fprintf(stderr, "delayq: %s\n", queue.status().ToString().c_str());
    return 1;
  }
  delayq::EnqueueRequest order;
  order.payload = R"({"orderId":42})";
  order.when.delay_ms = 1000;  // 30 * 60'000 for a real order's timeout
  order.key = "order-42";      // placing the same order twice is harmless
  auto enqueued = (*queue)->Enqueue("orders", order);
  if (!enqueued.ok()) {
    std::fprintf(stderr, "enqueue: %s\n", enqueued.status().ToString().c_str());
    return 1;
  }
  std::printf("enqueued %s (duplicate: %s)\n", enqueued->id.c_str(), enqueued->duplicate ? "yes" : "no");

  std::atomic<bool> done{false};
  delayq::WorkerOptions options;
  options.concurrency = 8;
  delayq::Worker worker(
      **queue, "orders",
      [&done](const delayq::Delivery& job) {  // returning acks; throwing nacks (retried with back-off)
        std::printf("cancelling unpaid order %s\n", job.payload.c_str());
        done = true;
      },
      options);
  worker.Start();
  while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  worker.Stop();  // finishes the jobs in flight
  return 0;
}
