// A blocking HTTP/1.1 client for the C++ SDK and the CLI: a pool of keep-alive connections
// to one server, with timeouts. Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::client {

struct HttpResult {
  int status = 0;
  std::string body;
};

// Aborts a request in flight from another thread (a long poll whose caller hung up). The
// socket is shut down under a lock, so a Cancel that races the request's end can never touch a
// descriptor that has been closed and reused. Thread-safe.
class RequestCancel {
 public:
  void Cancel();  // aborts the request in flight, or makes the next one fail at once
  bool cancelled() const;

 private:
  friend class HttpConnectionPool;
  bool Attach(int fd);  // false when already cancelled
  void Detach();
  mutable std::mutex mu_;
  int fd_ = -1;
  bool cancelled_ = false;
};

// https:// only (kInvalidArgument with http://). All PEM files.
struct TlsOptions {
  std::string ca_file;      // trust these CAs; empty: the system's
  std::string cert_file;    // a client certificate (chain), for a server that asks for one
  std::string key_file;     // its private key; empty: in cert_file
  std::string server_name;  // the name to send (SNI) and to find in the certificate; empty: the URL's host
  bool any() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty() || !server_name.empty(); }
};

class HttpConnectionPool {
 public:
  // `url`: http://HOST[:PORT] or https://HOST[:PORT] (default port 7070). kInvalidArgument for
  // anything else, TLS options with http://, or a TLS file that cannot be read or used.
  static Result<std::unique_ptr<HttpConnectionPool>> Create(std::string_view url, std::string auth_token,
                                                            int64_t timeout_ms, const TlsOptions& tls = {});
  ~HttpConnectionPool();

  // Sends one request and reads the answer. kUnavailable when the server cannot be reached
  // (the message names the address and the reason). `timeout_ms` 0 means the pool's timeout.
  // With `cancel`, the request runs on a connection of its own that cancel->Cancel() can abort
  // from another thread, before or while it runs (then kUnavailable, "cancelled").
  Result<HttpResult> Request(std::string_view method, std::string_view target, std::string_view body,
                             int64_t timeout_ms = 0, RequestCancel* cancel = nullptr);

  // Sends one request on a connection of its own and reads a streamed answer (chunked): each
  // piece of its body goes to `on_body` as it arrives, until on_body answers false, the answer
  // ends, or nothing arrives for `idle_timeout_ms` (kUnavailable). An answer other than 2xx is
  // read whole and given back in `refused` (status and body) with an ok Status. `cancel` ends
  // it from another thread, before or while it runs (ok).
  Status Stream(std::string_view target, std::string_view body, int64_t idle_timeout_ms,
                const std::function<bool(std::string_view)>& on_body, HttpResult* refused,
                RequestCancel* cancel = nullptr);

  const std::string& url() const { return url_; }
  int64_t timeout_ms() const { return timeout_ms_; }

 private:
  class Connection;
  struct Tls;
  HttpConnectionPool(std::string url, std::string host, std::string port, std::string token, int64_t timeout_ms,
                     std::unique_ptr<Tls> tls);
  Result<std::unique_ptr<Connection>> Connect(int64_t timeout_ms);
  static Result<std::unique_ptr<Tls>> MakeTls(const TlsOptions& options, const std::string& host);

  std::string url_, host_, port_, token_;
  int64_t timeout_ms_;
  std::unique_ptr<Tls> tls_;  // https only
  class DeadlineWatch;
  std::unique_ptr<DeadlineWatch> watch_;  // every request's deadline
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

// Percent-encodes a path segment or query value.
std::string UrlEncode(std::string_view s);

}  // namespace delayq::client
