// `delayq serve`: the server's options; src/server runs it.
#include "server/serve.h"

#include <cctype>
#include <cstdlib>

#include "cli/cli_common.h"
#include "cli/config_file.h"
#include "delayq/engine.h"

namespace delayq::cli {

namespace {

struct ServeArgs {
  server::ServeOptions serve;
  std::string durability = "sync";
};

// Where it listens (the API, the port file, the metrics) and what it stores in: the embedded
// store's files, or Redis.
void AddStoreOptions(CLI::App* s, ServeArgs& a) {
  server::ServeOptions& serve = a.serve;
  s->add_option("--listen", serve.listen, "HOST:PORT to listen on")->capture_default_str();
  s->add_option("--data", serve.data, "Directory of the embedded store")->capture_default_str();
  s->add_option(
       "--store", serve.store,
       "embedded | redis://[USER:PASSWORD@]HOST:PORT[/DB] | rediss://... (TLS) | "
       "redis-sentinel://H:P,.../MASTER | redis-cluster://H:P,... (docs/operations.md) | "
       "postgres://USER[:PASSWORD]@HOST:PORT/DB[?sslmode=...] (docs/postgres.md; or the password in PGPASSWORD)")
      ->capture_default_str();
  s->add_flag("--no-migrate", serve.no_migrate,
              "With a PostgreSQL store: do not create or upgrade the schema delayq (run `delayq migrate` for that); "
              "refuse to start unless it is this delayq's version");
  s->add_option("--durability", a.durability, "sync | interval | none")->capture_default_str();
  s->add_option("--sync-interval-ms", serve.sync_interval_ms, "fsync period with --durability interval")
      ->capture_default_str();
  s->add_option("--port-file", serve.port_file, "Write the bound port to this file");
  s->add_option("--redis-shards", serve.redis_shards, "With a Redis store: shards of each new queue (1..256)")
      ->capture_default_str();
  s->add_option("--redis-wait-replicas", serve.redis_wait_replicas,
                "With a Redis store: every write a client is answered ok for (enqueue, reserve, ack, nack, "
                "touch, cancel, reschedule, replay, purge) first reaches this many replicas (Redis WAIT), so a "
                "failover cannot lose it")
      ->capture_default_str()
      ->check(CLI::Range(0, 16));
  s->add_option("--redis-wait-timeout-ms", serve.redis_wait_timeout_ms,
                "With --redis-wait-replicas: how long a write waits for its replicas before it answers 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 60'000));
  s->add_option("--metrics-listen", serve.metrics_listen,
                "HOST:PORT that serves GET /metrics, /healthz and /readyz without the API token (for Prometheus); "
                "without it /metrics needs the token");
  s->add_option("--redis-password-file", serve.redis_password_file,
                "With a Redis store whose URL gives no password: read it from this file (else from the "
                "environment variable DELAYQ_REDIS_PASSWORD), so it is not in `ps`")
      ->check(CLI::ExistingFile);
}

// Who may use it: the token, TLS, the host names it answers to.
void AddSecurityOptions(CLI::App* s, server::ServeOptions& serve) {
  s->add_option("--auth-token", serve.auth_token, "Require this bearer token (or DELAYQ_AUTH_TOKEN)")
      ->envname("DELAYQ_AUTH_TOKEN");
  s->add_option("--auth-token-file", serve.auth_token_file,
                "Require the bearer token on this file's first line (not visible in ps)");
  s->add_option("--allowed-hosts", serve.allowed_hosts,
                "Host names clients may use to reach this server, besides IP addresses and localhost "
                "(e.g. delayq.internal); * allows any. Other names are 403: a guard against DNS rebinding")
      ->delimiter(',');
  s->add_option("--tls-cert", serve.tls_cert, "Serve HTTPS with this PEM certificate chain (with --tls-key)");
  s->add_option("--tls-key", serve.tls_key, "The PEM private key of --tls-cert");
  s->add_option("--tls-client-ca", serve.tls_client_ca,
                "Mutual TLS: accept only clients whose certificate a CA in this PEM file signed (with --tls-cert)");
  s->add_flag("--access-log", serve.access_log,
              "Log each request that reaches a route: method, target, status, milliseconds (or DELAYQ_ACCESS_LOG)")
      ->envname("DELAYQ_ACCESS_LOG");
  s->add_flag("--insecure-no-auth", serve.insecure_no_auth,
              "Allow --listen beyond loopback without a token (anyone who reaches the port can use the API)");
}

// Limits: threads, bodies, connections, waiting reserves, queues.
void AddLimitOptions(CLI::App* s, server::ServeOptions& serve) {
  s->add_option("--threads", serve.threads, "Server threads (0: max(4, CPU cores); on Redis max(8, CPU cores))")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  // The limits are unsigned: a negative value would wrap to "no limit" (found: --max-body -1
  // read a 17 MB body), so each is checked as a number first.
  s->add_option("--max-body", serve.max_body_bytes, "Largest request body, bytes (larger: 413)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  s->add_option("--max-body-memory", serve.max_body_memory,
                "Bytes of request bodies held at once across all connections (more: 503, body not read)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  s->add_option("--max-connections", serve.max_connections, "Open connections at most")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  s->add_option("--max-connections-per-address", serve.max_connections_per_address,
                "Open connections from one client address at most (more: 429); 0 for no cap. Raise it "
                "behind a proxy")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  s->add_option("--header-timeout", serve.header_timeout_s,
                "Seconds a request's header may take once its first byte arrived (its body: this plus 1 s "
                "per 64 KiB); slower clients are closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  s->add_option("--max-waiting", serve.max_waiting, "Waiting reserves, push streams and waits for an outcome at most")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  s->add_option("--stream-heartbeat-ms", serve.stream_heartbeat_ms,
                "The longest a push stream (POST /v1/queues/{q}/stream) stays silent: a heartbeat line then")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{15'000}));
  s->add_option("--max-queues", serve.max_queues,
                "Queues at most; an enqueue, config, pause or resume creating one more is 429 (reads and "
                "reserves never create a queue)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
}

// Every flag of serve can come from the environment too: --max-body-memory is
// DELAYQ_MAX_BODY_MEMORY (for systemd's Environment= and containers). The flag wins.
void AddEnvironmentNames(CLI::App* s) {
  for (CLI::Option* option : s->get_options()) {
    if (option->get_lnames().empty() || !option->get_envname().empty() || option->get_lnames()[0] == "help" ||
        option->get_lnames()[0] == "config") {
      continue;
    }
    std::string env = "DELAYQ_";
    for (char c : option->get_lnames()[0]) env.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
    option->envname(env);
    option->description(option->get_description() + " [env " + env + "]");
  }
}

// An option that turns on a protection, given empty (often an empty DELAYQ_* line, which CLI11
// takes for "not given"), would turn it off without a word: refused instead.
void RefuseEmptyProtections(const CLI::App* s) {
  for (const char* name : {"auth-token", "auth-token-file", "tls-cert", "tls-key", "tls-client-ca"}) {
    const CLI::Option* option = s->get_option(std::string("--") + name);
    const char* env = std::getenv(option->get_envname().c_str());
    const bool empty_flag = option->count() > 0 && option->as<std::string>().empty();
    if (empty_flag || (option->count() == 0 && env != nullptr && *env == '\0')) {
      throw CLI::ValidationError(std::string("--") + name,
                                 std::string("is given empty (") +
                                     (empty_flag ? "on the command line" : option->get_envname()) +
                                     " or the config file): give it a value, or leave it out");
    }
  }
}

}  // namespace

void AddServeCommand(CLI::App& app, int& rc) {
  auto a = std::make_shared<ServeArgs>();
  auto* s = app.add_subcommand("serve", "Run the delayq server (HTTP API, metrics, dashboard).");
  AddStoreOptions(s, *a);
  AddSecurityOptions(s, a->serve);
  AddLimitOptions(s, a->serve);
  AddConfigFileOption(s);
  AddEnvironmentNames(s);
  s->callback([a, s, &rc] {
    RefuseEmptyProtections(s);
    if (!ParseDurability(a->durability, &a->serve.durability)) {
      throw CLI::ValidationError("--durability", "must be sync, interval or none, not " + a->durability);
    }
    rc = server::Serve(a->serve);
  });
}

}  // namespace delayq::cli
