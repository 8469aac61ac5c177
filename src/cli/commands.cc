#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "server/serve.h"

namespace delayq::cli {

int Main(int argc, char** argv) {
  CLI::App app{"delayq: a delay queue. Jobs become deliverable at a chosen time and are "
               "delivered at least once."};
  app.require_subcommand(1);
  server::ServeOptions serve;
  std::string durability = "sync";
  auto* s = app.add_subcommand("serve", "Run the delayq server (HTTP API, metrics).");
  s->add_option("--listen", serve.listen, "HOST:PORT to listen on")->capture_default_str();
  s->add_option("--data", serve.data, "Directory of the embedded store")->capture_default_str();
  s->add_option("--store", serve.store, "embedded | redis://HOST:PORT | redis-cluster://H:P,...")
      ->capture_default_str();
  s->add_option("--durability", durability, "sync | interval | none")->capture_default_str();
  s->add_option("--sync-interval-ms", serve.sync_interval_ms, "With --durability interval")
      ->capture_default_str();
  s->add_option("--auth-token", serve.auth_token, "Require this bearer token")
      ->envname("DELAYQ_AUTH_TOKEN");
  s->add_option("--threads", serve.threads, "Server threads")->capture_default_str();
  s->add_option("--max-body", serve.max_body_bytes, "Largest request body in bytes")->capture_default_str();
  s->add_option("--max-connections", serve.max_connections, "Open connections at most")->capture_default_str();
  s->add_option("--max-waiting", serve.max_waiting, "Waiting reserves at most")->capture_default_str();
  s->add_option("--port-file", serve.port_file, "Write the bound port to this file");
  int rc = 0;
  s->callback([&] {
    if (!delayq::ParseDurability(durability, &serve.durability)) {
      throw CLI::ValidationError("--durability", "must be sync, interval or none, not " + durability);
    }
    rc = server::Serve(serve);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return rc;
}

}  // namespace delayq::cli
