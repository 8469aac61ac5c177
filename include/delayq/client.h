// delayq over HTTP: the same Queue interface as the embedded engine, spoken to a
// `delayq serve` (any store behind it).
//
//   auto client = delayq::Client::Connect("http://127.0.0.1:7070");
//   (*client)->Enqueue("orders", {.payload = R"({"orderId":42})", .when = {.delay_ms = 1800000}});
//
// Every method answers kUnavailable when the server cannot be reached; other errors are the
// server's, with its message. A write whose connection fails after it was sent is not sent
// again (the server may have done it: a kUnavailable write is in doubt, so retry enqueues with
// a key); reads are sent once more. Thread-safe; connections are pooled and kept alive.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/queue.h"

namespace delayq {

// One request the Client made and the server's answer (ClientOptions::on_answer).
struct HttpExchange {
  std::string_view method;        // GET, POST, ...
  std::string_view target;        // path and query, as sent
  std::string_view request_body;  // empty for none
  int status = 0;
  std::string_view body;  // the answer's body
};

namespace client {
class RequestCancel;
}

// Ends a Client::Stream from another thread, before or while it runs (the call then returns
// ok). One StreamCancel may serve one stream after another until it is cancelled.
class StreamCancel {
 public:
  StreamCancel();
  ~StreamCancel();
  StreamCancel(const StreamCancel&) = delete;
  StreamCancel& operator=(const StreamCancel&) = delete;
  void Cancel();
  bool cancelled() const;
  client::RequestCancel& request() { return *request_; }  // the HTTP layer's (internal)

 private:
  std::unique_ptr<client::RequestCancel> request_;
};

// Push delivery (Client::Stream, POST /v1/queues/{q}/stream).
struct StreamOptions {
  int32_t max_in_flight = 100;      // 1..1000: deliveries unacknowledged on the stream at once
  std::optional<int64_t> lease_ms;  // default: the queue's
  // A stream silent this long (no job, no heartbeat: the server sends one every 10 s when idle)
  // is taken for dead: kUnavailable.
  int64_t idle_timeout_ms = 35'000;
  StreamCancel* cancel = nullptr;  // ends the stream from another thread; must outlive the call
};

struct ClientOptions {
  std::string auth_token;       // sent as "Authorization: Bearer <token>" when not empty
  int64_t timeout_ms = 30'000;  // per request (a waiting reserve adds its wait_ms)
  // https:// only: trust the CAs in this PEM file instead of the system's. The server's
  // certificate must name the URL's host (DNS name or IP address) either way.
  std::string tls_ca_file;
  // https:// only: a client certificate (PEM chain) and its key (empty: in the same file), for a
  // server started with --tls-client-ca; and the name to expect in the server's certificate and
  // send by SNI, when it is not the URL's host (an IP address, a tunnel, a load balancer).
  std::string tls_cert_file, tls_key_file, tls_server_name;
  // Called with every answer the server gave (any status; not for requests that got none), on
  // the thread that made the request, before the call returns. For logging, or for tests that
  // check the answers against docs/openapi.yaml. It must not use the Client; the views last
  // only for the call.
  std::function<void(const HttpExchange&)> on_answer;
};

class Client : public Queue {
 public:
  // `url` is http://HOST[:PORT] or https://HOST[:PORT] (port 7070 unless given). Does not
  // contact the server (see Ping); kInvalidArgument for a malformed URL or an unreadable CA file.
  static Result<std::unique_ptr<Client>> Connect(std::string_view url, ClientOptions options = {});
  static Result<std::unique_ptr<Client>> connect(std::string_view url, ClientOptions options = {}) {
    return Connect(url, std::move(options));
  }

  // GET /healthz: ok when the server answers.
  virtual Status Ping() = 0;
  // Push delivery: opens a stream on `queue` and calls `on_line` with each job as it comes due
  // (and with nullptr at each heartbeat), on this thread, until on_line answers false (ok), the
  // server ends the stream (ok, or the error its last line gave), or the connection fails
  // (kUnavailable). Ack, nack, touch or release each delivery as usual, from any thread: an ack
  // makes room for the next (at most options.max_in_flight unacknowledged at once).
  virtual Status Stream(std::string_view queue, const StreamOptions& options,
                        const std::function<bool(const Delivery*)>& on_line) = 0;
  // GET /metrics: the Prometheus text.
  virtual Result<std::string> Metrics() = 0;
};

}  // namespace delayq
