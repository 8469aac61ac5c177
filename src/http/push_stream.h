// Push delivery (POST /v1/queues/{q}/stream, SPEC §11.4): one answer that stays open and carries
// each job as it comes due, one line each, to a consumer that acks them as usual. The stream
// reserves for its consumer with the queue's own long-poll (Queue::ReserveAsync, so flow
// control, priorities and groups apply as to any reserve), at most max_in_flight of its
// deliveries unacknowledged at a time: no request per handful of jobs, no answer per poll.
//
// Room comes back when a delivery ends through this server (ack, nack, release: PushStreams
// hears of it from those routes) or when its lease runs out. An ack through another server that
// shares the store frees its room at the lease's end. When the consumer goes away (or a line
// cannot be written), its unacknowledged jobs go back to ready without using an attempt
// (Queue::ReleaseBatch), as a reserve's unwritten answer's do.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "delayq/queue.h"
#include "http/metrics.h"
#include "http/stream_source.h"
#include "wire/stream.h"

namespace delayq::http {

class PushStream;

// This server's open streams' deliveries, by receipt.
class PushStreams {
 public:
  void Add(const std::string& receipt, const std::shared_ptr<PushStream>& stream);
  void Remove(std::span<const std::string> receipts);
  // The delivery is over (acked, nacked, released, or its receipt is no longer valid): its
  // stream has room for one more.
  void Ended(const std::string& receipt);
  // The delivery's lease was extended.
  void Touched(const std::string& receipt, int64_t lease_deadline_ms);
  size_t size() const;

 private:
  std::shared_ptr<PushStream> Find(const std::string& receipt, bool erase);
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<PushStream>> by_receipt_;
};

class PushStream final : public StreamSource, public std::enable_shared_from_this<PushStream> {
 public:
  // `heartbeat_ms`: the longest the stream stays silent (a heartbeat line then).
  PushStream(Queue& queue, PushStreams& streams, Metrics& metrics, std::string queue_name, wire::StreamRequest request,
             int64_t heartbeat_ms);
  ~PushStream() override;

  void Start(std::shared_ptr<StreamSink> sink) override;
  void Gone() override;
  void Ended(const std::string& receipt);
  void Touched(const std::string& receipt, int64_t lease_deadline_ms);

 private:
  void Pump();
  void OnJobs(Result<std::vector<Delivery>> jobs);
  void OnTick();
  // Under mu_: forgets deliveries whose lease has run out; their receipts go in `out`.
  void DropExpiredLocked(int64_t now_ms, std::vector<std::string>& out);
  void ScheduleTickLocked(int64_t now_ms);
  void Finish(bool give_back);

  Queue& queue_;
  PushStreams& streams_;
  Metrics& metrics_;
  const std::string name_;
  const wire::StreamRequest request_;
  const int64_t heartbeat_ms_;

  std::mutex mu_;
  std::shared_ptr<StreamSink> sink_;
  std::map<std::string, int64_t> in_flight_;  // receipt -> lease deadline (ms since the epoch)
  bool reserving_ = false;
  uint64_t reserve_handle_ = 0;
  bool ticking_ = false;
  bool over_ = false;
  int64_t last_sent_ms_ = 0;
};

}  // namespace delayq::http
