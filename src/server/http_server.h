// The HTTP/1.1 transport of `delayq serve`: asynchronous (Boost.Beast), keep-alive, one strand
// per connection on a small pool of threads. It parses requests, hands them to http::Api, and
// writes back what the Api answers — possibly much later, for a reserve that waits, without
// holding a thread meanwhile. A waiting reserve whose client hangs up is abandoned. With a
// certificate it serves TLS (OpenSSL) instead of plain HTTP.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "delayq/status.h"
#include "http/api.h"

namespace delayq::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 7070;              // 0: any free port (see HttpServer::port())
  int threads = 4;                   // I/O + handler threads; some handlers may wait for an fsync
  size_t max_body_bytes = 16 << 20;  // larger bodies get 413
  // Bytes of request bodies held at once across all connections, counted from each request's
  // Content-Length (max_body_bytes for a chunked one) before its body is read; a request that
  // would go over gets 503 and its body is not read.
  size_t max_body_memory = 256 << 20;
  size_t max_connections = 20'000;  // more get 503
  // Open connections from one client address; more get 429. 0: no cap. Behind a proxy every
  // client has the proxy's address: raise it there.
  size_t max_connections_per_address = 1'000;
  int idle_timeout_s = 120;  // an idle keep-alive connection is closed after this
  // Once a request's first byte arrived, its header must be complete within this, and its body
  // within this plus one second per 64 KiB (a client that trickles bytes is closed).
  int header_timeout_s = 10;
  // Both set: every connection is TLS (1.2 or later) with this PEM certificate chain and key;
  // Start() answers kInvalidArgument naming a file it cannot use.
  std::string tls_cert_file, tls_key_file;
  // With TLS: every client must present a certificate signed by a CA in this PEM file (mutual
  // TLS); one without is refused in the handshake. Empty: clients are not asked for one.
  std::string tls_client_ca_file;
  // Decides from the header alone (the body is empty) whether a request may go on; a response
  // refuses it before its body is read, so an unauthenticated client cannot make the server
  // hold a large body. Asked for bodies over 64 KiB (smaller ones are read and refused by the
  // handler, so the client reads the answer instead of a reset).
  std::function<std::optional<http::HttpResponse>(const http::HttpRequest&)> admit;
};

// "127.0.0.1:7070", "[::1]:7070", ":7070" (loopback); false when it is not HOST:PORT.
bool SplitHostPort(const std::string& listen, std::string* host, uint16_t* port);

// What the server calls per request; the contract of http::Api::Handle (reply exactly once,
// possibly later; the returned function abandons a request whose client went away).
using Handler = std::function<std::function<void()>(http::HttpRequest, http::Reply)>;

class HttpServer {
 public:
  // `connections` and `body_bytes` (optional) are kept equal to the number of open connections
  // and the bytes of request bodies held.
  HttpServer(Handler handler, HttpServerOptions options, std::atomic<int64_t>* connections = nullptr,
             std::atomic<int64_t>* body_bytes = nullptr);
  // Serves the delayq HTTP API.
  HttpServer(http::Api& api, HttpServerOptions options);
  ~HttpServer();

  // Binds and listens. kUnavailable names the address and the reason (e.g. in use).
  Status Start();
  uint16_t port() const;

  // Serves until Stop() (or SIGTERM/SIGINT when handle_signals) and everything in flight is
  // answered. `on_stop` runs once when a stop begins (the owner closes the store there, which
  // answers the waiting reserves).
  void Run(bool handle_signals, std::function<void()> on_stop = {});
  // Stops accepting, closes idle connections, lets requests in flight finish. Thread-safe.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::server
