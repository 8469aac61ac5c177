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

void PushStreams::Add(const std::string& receipt, const std::shared_ptr<PushStream>& stream) {
  std::lock_guard lock(mu_);
  by_receipt_[receipt] = stream;
}

void PushStreams::Remove(std::span<const std::string> receipts) {
  std::lock_guard lock(mu_);
  for (const auto& r : receipts) by_receipt_.erase(r);
}

std::shared_ptr<PushStream> PushStreams::Find(const std::string& receipt, bool erase) {
  std::lock_guard lock(mu_);
  auto it = by_receipt_.find(receipt);
  if (it == by_receipt_.end()) return nullptr;
  auto stream = it->second.lock();
  if (erase || !stream) by_receipt_.erase(it);
  return stream;
}

// The stream is told outside this lock: it takes its own, and adds receipts under it.
void PushStreams::Ended(const std::string& receipt) {
  if (auto s = Find(receipt, true)) s->Ended(receipt);
}

void PushStreams::Touched(const std::string& receipt, int64_t lease_deadline_ms) {
  if (auto s = Find(receipt, false)) s->Touched(receipt, lease_deadline_ms);
}

size_t PushStreams::size() const {
  std::lock_guard lock(mu_);
  return by_receipt_.size();
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
  Pump();
}

// Reserves as many jobs as there is room for, waiting up to the heartbeat; with no room, waits
// for a delivery to end (Ended) or for the next lease end or heartbeat (OnTick).
void PushStream::Pump() {
  ReserveRequest r;
  std::vector<std::string> expired;
  {
    std::lock_guard lock(mu_);
    if (over_ || reserving_ || !sink_) return;
    const int64_t now = NowMs();
    DropExpiredLocked(now, expired);
    const auto room = static_cast<int64_t>(request_.max_in_flight) - static_cast<int64_t>(in_flight_.size());
    if (room <= 0) {
      ScheduleTickLocked(now);
    } else {
      reserving_ = true;
      r.max = static_cast<int32_t>(room);
      r.wait_ms = heartbeat_ms_;
      r.lease_ms = request_.lease_ms;
      r.max_bytes = request_.max_bytes;
    }
  }
  streams_.Remove(expired);
  if (r.wait_ms == 0) return;  // no room: nothing reserved
  auto self = shared_from_this();
  const uint64_t handle =
      queue_.ReserveAsync(name_, r, [self](Result<std::vector<Delivery>> jobs) { self->OnJobs(std::move(jobs)); });
  bool cancel = false;
  {
    std::lock_guard lock(mu_);
    if (reserving_) reserve_handle_ = handle;  // not yet answered
    cancel = reserving_ && over_;              // Gone came in between, before the handle was known
  }
  if (cancel) queue_.CancelReserve(handle);
}

void PushStream::OnJobs(Result<std::vector<Delivery>> jobs) {
  std::vector<std::string> give_back;
  std::shared_ptr<StreamSink> end;
  {
    std::lock_guard lock(mu_);
    reserving_ = false;
    reserve_handle_ = 0;
    if (!jobs.ok()) {
      // The store cannot serve (it is closing, unavailable): the last line says why, and the
      // consumer opens the stream again (the clients do, with back-off).
      if (!over_ && sink_) {
        sink_->Send(wire::ErrorBody(jobs.status().code(), jobs.status().message()) + "\n");
        end = sink_;
      }
    } else if (over_) {
      for (const auto& d : *jobs) give_back.push_back(d.receipt);
    } else {
      const int64_t now = NowMs();
      if (jobs->empty() && now - last_sent_ms_ >= heartbeat_ms_ / 2) {
        sink_->Send(wire::WriteStreamHeartbeat(now));
        last_sent_ms_ = now;
      }
      for (const auto& d : *jobs) {
        if (!sink_->Send(wire::WriteStreamDelivery(d))) {
          give_back.push_back(d.receipt);
          continue;
        }
        in_flight_[d.receipt] = d.lease_deadline_ms;
        streams_.Add(d.receipt, shared_from_this());
        last_sent_ms_ = now;
      }
    }
  }
  // A consumer that left while these were taken for it: they are ready again, no attempt used.
  if (!give_back.empty()) (void)queue_.ReleaseBatch(name_, give_back);
  if (end) {
    Finish(false);
    end->End();
    return;
  }
  Pump();
}

void PushStream::OnTick() {
  {
    std::lock_guard lock(mu_);
    ticking_ = false;
    if (over_) return;
    const int64_t now = NowMs();
    if (now - last_sent_ms_ >= heartbeat_ms_ && sink_) {
      sink_->Send(wire::WriteStreamHeartbeat(now));
      last_sent_ms_ = now;
    }
  }
  Pump();
}

void PushStream::DropExpiredLocked(int64_t now_ms, std::vector<std::string>& out) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second <= now_ms) {
      out.push_back(it->first);
      it = in_flight_.erase(it);
    } else {
      ++it;
    }
  }
}

void PushStream::ScheduleTickLocked(int64_t now_ms) {
  if (ticking_ || !sink_) return;
  int64_t at = last_sent_ms_ + heartbeat_ms_;
  for (const auto& [receipt, deadline] : in_flight_) at = std::min(at, deadline);
  ticking_ = true;
  std::weak_ptr<PushStream> weak = shared_from_this();
  sink_->After(std::max<int64_t>(1, at - now_ms), [weak] {
    if (auto self = weak.lock()) self->OnTick();
  });
}

void PushStream::Ended(const std::string& receipt) {
  {
    std::lock_guard lock(mu_);
    if (in_flight_.erase(receipt) == 0) return;
  }
  Pump();
}

void PushStream::Touched(const std::string& receipt, int64_t lease_deadline_ms) {
  std::lock_guard lock(mu_);
  if (auto it = in_flight_.find(receipt); it != in_flight_.end()) it->second = lease_deadline_ms;
}

void PushStream::Gone() { Finish(true); }

// The stream is over: its receipts are forgotten, a waiting reserve is abandoned (what it takes
// then comes back through OnJobs, which gives it back), and with `give_back` the deliveries not
// acknowledged go back to ready.
void PushStream::Finish(bool give_back) {
  std::vector<std::string> receipts;
  uint64_t handle = 0;
  {
    std::lock_guard lock(mu_);
    if (over_) return;
    over_ = true;
    for (const auto& [receipt, deadline] : in_flight_) receipts.push_back(receipt);
    in_flight_.clear();
    if (reserving_) handle = reserve_handle_;
  }
  streams_.Remove(receipts);
  if (handle != 0) queue_.CancelReserve(handle);
  if (give_back && !receipts.empty()) (void)queue_.ReleaseBatch(name_, receipts);
}

}  // namespace delayq::http
