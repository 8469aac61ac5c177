// One connection to a Redis node, as delayq speaks to it: TCP, or TLS over TCP, with RESP parsed
// by hiredis' reader, and AUTH (an ACL user, or the default one) and SELECT done on connecting.
//
// Written here, over OpenSSL and hiredis' reader, because hiredis 0.14 (Debian 12's) has no TLS:
// its own connections could not reach a managed Redis (ElastiCache, Memorystore, Azure, Upstash,
// Redis Cloud), which requires TLS and a password. Not thread-safe: a pool hands each connection
// to one caller at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "delayq/status.h"

namespace delayq::redis {

struct Value;
struct Endpoint;

// How to log in: AUTH [user] password after connecting (nothing without a password), then SELECT.
struct RedisAuth {
  std::string user;      // an ACL user; empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECT db when not 0 (one Redis only: a cluster has db 0 alone)
};

// TLS towards Redis (rediss://).
struct RedisTlsOptions {
  bool enabled = false;
  std::string ca_file;      // PEM CAs to trust; empty: the system's
  std::string cert_file;    // a client certificate (PEM), for Redis with tls-auth-clients
  std::string key_file;     // its key
  std::string server_name;  // SNI and the name the certificate must carry; empty: the host
  bool insecure = false;    // no certificate check at all (only when asked: ?insecure=true)
};

// A hiredis reply as a Value (redis_client.h).
Value ReplyToValue(const void* redis_reply);

// The TLS context every connection of one client shares (certificates read once).
class RedisTls;
Result<std::shared_ptr<RedisTls>> MakeRedisTls(const RedisTlsOptions& options);

class RedisConnection {
 public:
  // Connects (within timeout_ms), does the TLS handshake when `tls`, then AUTH and SELECT. The
  // errors name the node and what went wrong (refused, NOAUTH, WRONGPASS, the certificate), never
  // the password.
  static Result<std::unique_ptr<RedisConnection>> Open(const Endpoint& node, const RedisAuth& auth, const RedisTls* tls,
                                                       int timeout_ms);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends the commands, pipelined, within the timeout; kUnavailable when the connection broke.
  Status Send(const std::vector<std::vector<std::string>>& commands);
  // The next reply. Within `timeout_ms`, or kUnavailable (the connection is then broken: a reply
  // may still come); with `idle_ok`, nothing within the time is no reply (nullopt), and the
  // connection stays usable (a subscriber waiting for messages).
  Result<std::optional<Value>> Read(int timeout_ms, bool idle_ok = false);
  // Whether an idle connection is still open: no end, no reset and no stray bytes are waiting.
  bool StillOpen();
  // Shuts the socket's reading down, from any thread: a Read waiting on it ends at once (with an
  // error).
  // The connection must outlive the call; it is broken afterwards.
  void Interrupt();

 private:
  struct Impl;
  explicit RedisConnection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::redis
