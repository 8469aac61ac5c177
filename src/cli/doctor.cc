// `delayq doctor redis://HOST:PORT`: the Redis settings that lose or delay jobs, with the fixes.
// Exit 0 when none is found, 1 when some are.
#include "store/redis/doctor.h"

#include <cstdlib>
#include <fstream>

#include "cli/cli_common.h"
#include "cli/exit_codes.h"
#include "store/redis/redis_client.h"
#include "wire/json_writer.h"

namespace delayq::cli {

void AddDoctorCommand(CLI::App& app, Global& g, int& rc) {
  auto url = std::make_shared<std::string>();
  auto password_file = std::make_shared<std::string>();
  auto* c = app.add_subcommand("doctor", "Check a Redis for settings that lose or delay jobs");
  c->add_option("url", *url,
                "redis://[USER:PASSWORD@]HOST:PORT, rediss://... (TLS), redis-sentinel://H:P,.../MASTER or "
                "redis-cluster://H:P,...")
      ->required();
  c->add_option("--redis-password-file", *password_file,
                "Redis' password when the URL gives none (else the environment's DELAYQ_REDIS_PASSWORD)")
      ->check(CLI::ExistingFile);
  c->callback([url, password_file, &g, &rc] {
    std::string password;
    if (!password_file->empty()) {
      std::ifstream in(*password_file);
      std::getline(in, password);
      while (!password.empty() && (password.back() == '\r' || password.back() == ' ')) password.pop_back();
    } else if (const char* env = std::getenv("DELAYQ_REDIS_PASSWORD")) {
      password = env;
    }
    auto findings = redis::Doctor(*url, password);
    if (!findings.ok()) {
      rc = Fail(findings.status());
      return;
    }
    if (g.json) {
      wire::JsonWriter w;
      w.BeginObject().Key("problems").BeginArray();
      for (const auto& f : *findings) {
        w.BeginObject()
            .Key("node")
            .String(f.node)
            .Key("problem")
            .String(f.problem)
            .Key("fix")
            .String(f.fix)
            .EndObject();
      }
      w.EndArray().EndObject();
      std::printf("%s\n", w.str().c_str());
    } else if (findings->empty()) {
      std::printf("%s: no setting found that can lose or delay jobs\n", redis::RedisUrl::Redacted(*url).c_str());
    } else {
      for (const auto& f : *findings) {
        std::printf("PROBLEM  %s: %s\n    fix: %s\n", f.node.c_str(), f.problem.c_str(), f.fix.c_str());
      }
      std::printf("%zu problem%s found\n", findings->size(), findings->size() == 1 ? "" : "s");
    }
    rc = findings->empty() ? 0 : kExitFailure;
  });
}

}  // namespace delayq::cli
