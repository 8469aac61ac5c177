#include "http/push_stream.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "wire/error.h"

namespace delayq::http {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void PushStreams::Add(std::span<const Delivery> deliveries, const std::shared_ptr<PushStream>& stream) {
  std::lock_guard lock(mu_);
  for (const auto& d : deliveries) by_receipt_[d.receipt] = stream;
}

void PushStreams::Remove(std::span<const std::string> receipts) {
  std::lock_guard lock(mu_);
  for (const auto& r : receipts) by_receipt_.erase(r);
}

std::shared_ptr<PushStream> PushStreams::Find(const std::string& receipt) {
  std::lock_guard lock(mu_);
  auto it = by_receipt_.find(receipt);
  if (it == by_receipt_.end()) return nullptr;
  auto stream = it->second.lock();
  if (!stream) by_receipt_.erase(it);
  return stream;
}

// The streams are told outside this lock: each takes its own, and adds receipts under it.
void PushStreams::Ended(std::span<const std::string> receipts) {
  std::map<std::shared_ptr<PushStream>, std::vector<std::string>> by_stream;
  {
    std::lock_guard lock(mu_);
    for (const auto& receipt : receipts) {
      auto it = by_receipt_.find(receipt);
      if (it == by_receipt_.end()) continue;
      auto stream = it->second.lock();
      by_receipt_.erase(it);
      if (stream) by_stream[stream].push_back(receipt);
    }
  }
  for (const auto& [stream, ended] : by_stream) stream->Ended(ended);
}

void PushStreams::Touched(const std::string& receipt, int64_t lease_deadline_ms) {
  if (auto s = Find(receipt)) s->Touched(receipt, lease_deadline_ms);
}

void PushStreams::QueueDeleted(std::string_view queue) {
  std::vector<std::shared_ptr<PushStream>> streams;
  {
    std::lock_guard lock(mu_);
    for (const auto& [raw, weak] : open_) {
      auto s = weak.lock();
      if (s && s->queue() == queue) streams.push_back(std::move(s));
    }
  }
  for (const auto& s : streams) Remove(s->ForgetAll());
}

size_t PushStreams::size() const {
  std::lock_guard lock(mu_);
  return by_receipt_.size();
}

void PushStreams::Opened(const std::shared_ptr<PushStream>& stream) {
  std::lock_guard lock(mu_);
  open_[stream.get()] = stream;
}

void PushStreams::Closed(const PushStream* stream) {
  std::lock_guard lock(mu_);
  open_.erase(stream);
}

void PushStreams::StopAll() {
  std::vector<std::shared_ptr<PushStream>> streams;
  {
    std::lock_guard lock(mu_);
    for (const auto& [raw, weak] : open_) {
      if (auto s = weak.lock()) streams.push_back(std::move(s));
    }
  }
  for (const auto& s : streams) s->Stop();
}

PushStream::PushStream(Queue& queue, PushStreams& streams, Metrics& metrics, std::string queue_name,
                       wire::StreamRequest request, int64_t heartbeat_ms)
    : queue_(queue),
      streams_(streams),
      metrics_(metrics),
      name_(std::move(queue_name)),
      request_(request),
      heartbeat_ms_(heartbeat_ms) {
  ++metrics_.streams;
}

PushStream::~PushStream() { --metrics_.streams; }

void PushStream::Start(std::shared_ptr<StreamSink> sink) {
  {
    std::lock_guard lock(mu_);
    if (over_) return;
    sink_ = std::move(sink);
    last_sent_ms_ = NowMs();
  }
  streams_.Opened(shared_from_this());
  Pump();
}

// The stream's loop. Reserves as many jobs as there is room for, waiting a little less than the
// heartbeat; with no room (or lines still waiting for a slow consumer, or a store that answered
// before the wait), waits for a delivery to end (Ended) or for a tick (OnTick).
void PushStream::Pump() {
  {
    std::lock_guard lock(mu_);
    if (pumping_) return;  // the thread in the loop sees this call's change when it goes round
    pumping_ = true;
  }
  auto self = shared_from_this();
  while (true) {
    ReserveRequest r;
    std::vector<std::string> expired;
    uint64_t generation;
    bool stuck;
    {
      std::lock_guard lock(mu_);
      generation = NextLocked(r, expired);
      stuck = stuck_;
      if (generation == 0) pumping_ = false;
    }
    streams_.Remove(expired);
    if (generation == 0) {
      if (stuck) {
        // Its unread deliveries go back, unused; its connection is closed without their lines.
        if (auto sink = Finish(true)) sink->Abort();
      }
      return;
    }
    const uint64_t handle = queue_.ReserveAsync(name_, r, [self, generation](Result<std::vector<Delivery>> jobs) {
      self->OnJobs(generation, std::move(jobs));
    });
    bool cancel = false;
    {
      std::lock_guard lock(mu_);
      const bool waiting = reserving_ && generation_ == generation;  // not answered yet
      if (waiting) reserve_handle_ = handle;
      cancel = waiting && over_;  // Finish came in between, before the handle was known
    }
    if (cancel) queue_.CancelReserve(handle);
  }
}

uint64_t PushStream::NextLocked(ReserveRequest& r, std::vector<std::string>& expired) {
  if (over_ || !sink_) return 0;
  const int64_t now = NowMs();
  int64_t check_at = kNoTime;
  if (!DropExpiredLocked(now, expired, check_at)) {
    // A line the consumer never read is at half its lease: it is stuck, and more lines would
    // only use up the attempts of more jobs. The stream ends (Pump's caller sees stuck_ next),
    // giving back its deliveries while their leases still hold.
    stuck_ = true;
    return 0;
  }
  if (check_at != kNoTime) ScheduleTickLocked(check_at, now);  // a waiting reserve does not hide it
  if (reserving_) return 0;
  const auto room = static_cast<int64_t>(request_.max_in_flight) - static_cast<int64_t>(in_flight_.size());
  if (answered_early_) {
    ScheduleTickLocked(now + std::min<int64_t>(1000, heartbeat_ms_), now);
    return 0;
  }
  if (sink_->Pending() > kMaxPendingBytes) {
    ScheduleTickLocked(now + 50, now);
    return 0;
  }
  if (room <= 0) {
    int64_t at = last_sent_ms_ + heartbeat_ms_;
    for (const auto& [receipt, f] : in_flight_) at = std::min(at, f.lease_deadline_ms);
    ScheduleTickLocked(at, now);
    return 0;
  }
  reserving_ = true;
  reserve_handle_ = 0;
  reserve_started_ms_ = now;
  r.max = static_cast<int32_t>(room);
  r.wait_ms = std::max<int64_t>(1, heartbeat_ms_ * 9 / 10);
  r.lease_ms = request_.lease_ms;
  // At most what the lines waiting for the consumer leave of kMaxPendingBytes (the first job
  // always comes): one reserve of max_bytes (16 MiB by default) would hold that much here.
  const auto room_bytes = static_cast<int64_t>(kMaxPendingBytes) - static_cast<int64_t>(sink_->Pending());
  r.max_bytes = std::min<int64_t>(request_.max_bytes, std::max<int64_t>(1, room_bytes));
  return ++generation_;
}

void PushStream::OnJobs(uint64_t generation, Result<std::vector<Delivery>> jobs) {
  std::vector<std::string> give_back;
  std::shared_ptr<StreamSink> end;
  {
    std::lock_guard lock(mu_);
    if (generation == generation_) {
      reserving_ = false;
      reserve_handle_ = 0;
    }
    const int64_t now = NowMs();
    if (!jobs.ok()) {
      // The store cannot serve (it is unavailable): the last line says why, and the consumer
      // opens the stream again (the clients do, with back-off).
      if (!over_ && sink_) {
        SendLocked(wire::ErrorBody(jobs.status().code(), jobs.status().message()) + "\n");
        end = sink_;
      }
    } else if (over_) {
      for (const auto& d : *jobs) give_back.push_back(d.receipt);
    } else if (jobs->empty()) {
      answered_early_ = now - reserve_started_ms_ < heartbeat_ms_ / 2;
      if (now - last_sent_ms_ >= heartbeat_ms_ / 2) {
        SendLocked(wire::WriteStreamHeartbeat(now));
        last_sent_ms_ = now;
      }
    } else {
      // Known as this stream's before its line goes (an ack can come the moment it is written);
      // the lines of one reserve go out as one chunk (one hand-off to the connection's strand).
      std::string lines;
      for (const auto& d : *jobs) {
        lines += wire::WriteStreamDelivery(d);
        in_flight_[d.receipt] = {d.lease_deadline_ms, sent_bytes_ + lines.size(),
                                 now + std::max<int64_t>(0, d.lease_deadline_ms - now) / 2};
      }
      sent_bytes_ += lines.size();
      streams_.Add(*jobs, shared_from_this());
      if (sink_->Send(std::move(lines))) {
        last_sent_ms_ = now;
      } else {
        for (const auto& d : *jobs) {
          in_flight_.erase(d.receipt);
          give_back.push_back(d.receipt);
        }
      }
    }
  }
  if (!give_back.empty()) {
    streams_.Remove(give_back);
    // A consumer that left while these were taken for it: ready again, no attempt used.
    (void)queue_.ReleaseBatch(name_, give_back);
  }
  if (end) {
    Finish(false);
    end->End();
    return;
  }
  // Not on this thread: a waiting reserve is answered on the store's own thread (the Redis
  // store's scheduler, which also promotes due jobs), and the next reserve made there would keep
  // it busy for as long as jobs come (a stream's reserves then starved the promotions that feed
  // them: seconds of lateness in a burst). The connection's strand makes it, as a long poll's
  // next reserve comes from its connection.
  PumpOnStrand();
}

void PushStream::PumpOnStrand() {
  std::shared_ptr<StreamSink> sink;
  {
    std::lock_guard lock(mu_);
    if (over_) return;
    sink = sink_;
  }
  if (!sink) return;
  std::weak_ptr<PushStream> weak = shared_from_this();
  sink->Post([weak] {
    if (auto self = weak.lock()) self->Pump();
  });
}

void PushStream::OnTick() {
  {
    std::lock_guard lock(mu_);
    ticking_ = false;
    tick_at_ms_ = kNoTime;
    answered_early_ = false;
    if (over_) return;
    const int64_t now = NowMs();
    if (now - last_sent_ms_ >= heartbeat_ms_ && sink_) {
      SendLocked(wire::WriteStreamHeartbeat(now));
      last_sent_ms_ = now;
    }
  }
  Pump();
}

// A line that is not a delivery (a heartbeat, the error line): counted in sent_bytes_ as the
// sink counts it in Written(), so that a delivery's line_end stays comparable with Written().
void PushStream::SendLocked(std::string line) {
  sent_bytes_ += line.size();
  sink_->Send(std::move(line));
}

bool PushStream::DropExpiredLocked(int64_t now_ms, std::vector<std::string>& out, int64_t& check_at) {
  const uint64_t written = sink_ ? sink_->Written() : 0;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    const InFlight& f = it->second;
    if (f.line_end > written) {  // not read yet
      if (f.stuck_at_ms <= now_ms) return false;
      check_at = std::min(check_at, f.stuck_at_ms);
      ++it;
    } else if (f.lease_deadline_ms <= now_ms) {
      out.push_back(it->first);
      it = in_flight_.erase(it);
    } else {
      ++it;
    }
  }
  return true;
}

// One tick at a time, unless a sooner one is asked for (an unwritten line's check): the later
// one then also comes, and only pumps.
void PushStream::ScheduleTickLocked(int64_t at_ms, int64_t now_ms) {
  if (!sink_ || (ticking_ && at_ms >= tick_at_ms_)) return;
  ticking_ = true;
  tick_at_ms_ = at_ms;
  std::weak_ptr<PushStream> weak = shared_from_this();
  sink_->After(std::max<int64_t>(1, at_ms - now_ms), [weak] {
    if (auto self = weak.lock()) self->OnTick();
  });
}

void PushStream::Ended(std::span<const std::string> receipts) {
  size_t erased = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& receipt : receipts) erased += in_flight_.erase(receipt);
  }
  // An ack is answered on the store's thread (the embedded store's commit thread, after the
  // fsync): the reserve for the room it made is made on the connection's strand, as OnJobs's.
  if (erased > 0) PumpOnStrand();
}

std::vector<std::string> PushStream::ForgetAll() {
  std::vector<std::string> receipts;
  {
    std::lock_guard lock(mu_);
    for (const auto& [receipt, f] : in_flight_) receipts.push_back(receipt);
    in_flight_.clear();
  }
  Pump();
  return receipts;
}

void PushStream::Touched(const std::string& receipt, int64_t lease_deadline_ms) {
  std::lock_guard lock(mu_);
  if (auto it = in_flight_.find(receipt); it != in_flight_.end()) it->second.lease_deadline_ms = lease_deadline_ms;
}

void PushStream::Gone() { Finish(true); }

void PushStream::Stop() {
  if (auto sink = Finish(false)) sink->End();
}

std::shared_ptr<StreamSink> PushStream::Finish(bool give_back) {
  std::vector<std::string> receipts;
  uint64_t handle = 0;
  std::shared_ptr<StreamSink> sink;
  {
    std::lock_guard lock(mu_);
    if (over_) return nullptr;
    over_ = true;
    for (const auto& [receipt, f] : in_flight_) receipts.push_back(receipt);
    in_flight_.clear();
    if (reserving_) handle = reserve_handle_;  // 0: Pump cancels it once ReserveAsync returns
    sink = sink_;
  }
  streams_.Closed(this);
  streams_.Remove(receipts);
  if (handle != 0) queue_.CancelReserve(handle);
  if (give_back && !receipts.empty()) (void)queue_.ReleaseBatch(name_, receipts);
  return sink;
}

}  // namespace delayq::http
