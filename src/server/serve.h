// `delayq serve`: opens the store, starts the HTTP server, serves until SIGTERM/SIGINT.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "delayq/engine.h"

namespace delayq::server {

struct ServeOptions {
  std::string listen = "127.0.0.1:7070";  // host:port; port 0 picks a free one
  std::string data = "./delayq-data";     // the embedded store's directory
  std::string store = "embedded";         // embedded | redis://HOST:PORT | redis-cluster://... | postgres://...
  bool no_migrate = false;                // postgres: refuse a schema not current instead of migrating it
  Durability durability = Durability::kSync;
  int64_t sync_interval_ms = 50;
  std::string auth_token;                  // empty: no authentication
  std::string auth_token_file;             // read the token from this file (not visible in ps)
  bool insecure_no_auth = false;           // allow listening beyond loopback without a token
  bool access_log = false;                 // log every answered request (info)
  std::vector<std::string> allowed_hosts;  // Host names answered besides IPs and localhost
  int threads = 0;                         // I/O and handler threads; 0: max(4, CPU cores), on Redis max(8, ...)
  size_t max_body_bytes = 16 << 20;
  size_t max_body_memory = 256 << 20;  // request bodies held at once, all connections
  size_t max_connections = 20'000;
  size_t max_connections_per_address = 1'000;
  int header_timeout_s = 10;
  std::string tls_cert, tls_key;  // PEM files: serve https only
  std::string tls_client_ca;      // PEM CAs: clients must present a certificate they signed
  int64_t max_waiting = 50'000;
  int64_t stream_heartbeat_ms = 10'000;  // the longest a push stream stays silent
  size_t max_queues = 10'000;            // creating more is 429
  std::string port_file;                 // when set, the bound port is written here (tests)
  int redis_shards = 1;                  // shards of a queue created on Redis (1..256)
  int redis_wait_replicas = 0;           // Redis: writes wait for this many replicas (WAIT)
  int redis_wait_timeout_ms = 1000;      // ... at most this long, else 503
  // Redis' password when the URL gives none: read from this file (one line), else taken from the
  // environment variable DELAYQ_REDIS_PASSWORD, so that it is not in `ps`.
  std::string redis_password_file;
  // HOST:PORT for GET /metrics, /healthz and /readyz without the token (Prometheus); empty: none.
  std::string metrics_listen;
};

// Runs the server; returns the process exit code (0 after a clean stop).
int Serve(const ServeOptions& options);

}  // namespace delayq::server
