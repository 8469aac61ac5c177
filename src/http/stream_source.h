// A streamed HTTP answer, between the API (which knows what to send) and the transport (which
// knows the socket): HttpResponse::stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace delayq::http {

// The transport's side of a streamed answer (HttpResponse::stream). Safe to call from any thread.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Queues one chunk, written after those queued before it. False once the stream is over (the
  // client went away, a write failed, the server stops): nothing more goes out.
  virtual bool Send(std::string chunk) = 0;
  // Ends the answer with its last chunk once what is queued is written; then the connection closes.
  virtual void End() = 0;
  // Closes the connection at once: what is queued and unwritten is dropped (the source gave
  // those deliveries back, so they must not reach the consumer).
  virtual void Abort() = 0;
  // Calls `fn` (on the connection's strand) after `ms`, unless the stream is over by then.
  virtual void After(int64_t ms, std::function<void()> fn) = 0;
  // Calls `fn` on the connection's strand soon (no timer), unless the stream is over by then.
  virtual void Post(std::function<void()> fn) = 0;
  // Bytes sent and not yet written to the connection (a client that reads slowly, or not at all).
  virtual size_t Pending() const = 0;
  // Bytes written to the connection so far (of those sent, in order).
  virtual uint64_t Written() const = 0;
};

// What a streamed answer sends: started once its head is written.
class StreamSource {
 public:
  virtual ~StreamSource() = default;
  virtual void Start(std::shared_ptr<StreamSink> sink) = 0;
  // The stream is over without End: the client went away, or a write failed or stalled. Called
  // at most once, maybe before Start (the head could not be written). Not when the server stops:
  // the API ends its streams itself first (Api::StopStreams), their deliveries left leased.
  virtual void Gone() = 0;
};

}  // namespace delayq::http
