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
// (Queue::ReleaseBatch), as a reserve's unwritten answer's do. A consumer that reads slowly or
// not at all gets no more jobs than kMaxPendingBytes of waiting lines leave room for, and a line
// still waiting at half its lease ends the stream (its deliveries given back while their leases
// hold, its lines not written: StreamSink::Abort). A queue deleted with its jobs frees its
// streams' windows (PushStreams::QueueDeleted). When the server
// stops, the stream ends and its deliveries stay leased (the consumer may still be working on
// them, and may ack them through another server or after the restart).
//
// One thread at a time runs the stream's loop (Pump): a reserve that answers at once, inside
// Queue::ReserveAsync, makes the loop go round again instead of calling it from within itself.
#pragma once

#include <cstdint>
#include <limits>
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
  void Add(std::span<const Delivery> deliveries, const std::shared_ptr<PushStream>& stream);
  // The streams open now (Start to their end), and the end of them all when the server stops.
  void Opened(const std::shared_ptr<PushStream>& stream);
  void Closed(const PushStream* stream);
  void StopAll();
  void Remove(std::span<const std::string> receipts);
  // The deliveries are over (acked, nacked, released, or their receipts are no longer valid):
  // their streams have room for as many more, and each stream reserves once for it.
  void Ended(std::span<const std::string> receipts);
  // The delivery's lease was extended.
  void Touched(const std::string& receipt, int64_t lease_deadline_ms);
  // The queue was deleted (with its jobs): the deliveries of its streams are over.
  void QueueDeleted(std::string_view queue);
  size_t size() const;

 private:
  std::shared_ptr<PushStream> Find(const std::string& receipt);
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<PushStream>> by_receipt_;
  std::unordered_map<const PushStream*, std::weak_ptr<PushStream>> open_;
};

class PushStream final : public StreamSource, public std::enable_shared_from_this<PushStream> {
 public:
  // `heartbeat_ms`: the longest the stream stays silent (a heartbeat line then).
  PushStream(Queue& queue, PushStreams& streams, Metrics& metrics, std::string queue_name, wire::StreamRequest request,
             int64_t heartbeat_ms);
  ~PushStream() override;

  // Lines waiting for a slow consumer past which the stream reserves nothing more.
  static constexpr size_t kMaxPendingBytes = 1 << 20;

  void Start(std::shared_ptr<StreamSink> sink) override;
  void Gone() override;
  // The server stops: the stream ends with its last chunk; its deliveries stay leased.
  void Stop();
  void Ended(std::span<const std::string> receipts);
  void Touched(const std::string& receipt, int64_t lease_deadline_ms);
  // Its queue was deleted: every delivery it holds is over (their receipts are returned).
  std::vector<std::string> ForgetAll();
  const std::string& queue() const { return name_; }

 private:
  void Pump();
  // Pump, from the connection's strand (not the thread that answered a reserve).
  void PumpOnStrand();
  // Under mu_: what the loop does next. A reserve to make (its generation, and the request in
  // `r`), or 0: wait for an answer, an ack or a tick.
  uint64_t NextLocked(ReserveRequest& r, std::vector<std::string>& expired);
  void OnJobs(uint64_t generation, Result<std::vector<Delivery>> jobs);
  void OnTick();
  // Under mu_: forgets deliveries whose lease has run out; their receipts go in `out`. False when
  // a line that has not reached the connection is at half its lease: the consumer is not
  // reading (the stream ends while its deliveries can still be given back unused). `check_at`:
  // when the next unwritten line gets there (kNoTime: none waits).
  bool DropExpiredLocked(int64_t now_ms, std::vector<std::string>& out, int64_t& check_at);
  void ScheduleTickLocked(int64_t at_ms, int64_t now_ms);
  void SendLocked(std::string line);
  // Ends the stream: what it holds is forgotten, a waiting reserve abandoned; with `give_back`
  // the deliveries not acknowledged are ready again. Answers the sink (null when it was over).
  std::shared_ptr<StreamSink> Finish(bool give_back);

  Queue& queue_;
  PushStreams& streams_;
  Metrics& metrics_;
  const std::string name_;
  const wire::StreamRequest request_;
  const int64_t heartbeat_ms_;

  std::mutex mu_;
  std::shared_ptr<StreamSink> sink_;
  struct InFlight {
    int64_t lease_deadline_ms;  // ms since the epoch
    uint64_t line_end;          // the stream's bytes sent once its line was: written when Written() reaches it
    int64_t stuck_at_ms;        // half its lease: a line still unwritten then ends the stream
  };
  static constexpr int64_t kNoTime = std::numeric_limits<int64_t>::max();
  std::map<std::string, InFlight> in_flight_;  // by receipt
  uint64_t sent_bytes_ = 0;                    // of lines handed to the sink
  bool pumping_ = false;                       // a thread runs the loop (Pump)
  bool reserving_ = false;
  uint64_t generation_ = 0;      // of the reserve made last
  uint64_t reserve_handle_ = 0;  // of the waiting reserve (0 until ReserveAsync returned)
  int64_t reserve_started_ms_ = 0;
  bool answered_early_ = false;  // the last reserve answered nothing before its wait (the store stops)
  bool ticking_ = false;
  int64_t tick_at_ms_ = kNoTime;  // of the tick scheduled (a sooner one may be scheduled beside it)
  bool stuck_ = false;            // a lease ran out on a line never written: the stream ends
  bool over_ = false;
  int64_t last_sent_ms_ = 0;
};

}  // namespace delayq::http
