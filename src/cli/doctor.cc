// `delayq doctor redis://HOST:PORT` (or postgres://...): the Redis or PostgreSQL settings that
// lose or delay jobs, with the fixes. Exit 0 when none is found, 1 when some are.
// `delayq migrate postgres://...`: creates or upgrades the schema delayq.
#include "store/redis/doctor.h"

#include <fmt/format.h>

#include "store/postgres/doctor.h"
#include "store/postgres/migrate.h"
#include "store/postgres/pg_connection.h"

#include <cstdlib>
#include <fstream>

#include "cli/cli_common.h"
#include "cli/exit_codes.h"
#include "store/redis/redis_client.h"
#include "wire/json_writer.h"

namespace delayq::cli {

namespace {

bool IsPostgres(const std::string& url) { return postgres::IsPostgresUrl(url); }

// The findings, as text or JSON; the exit code.
int Report(const Global& g, const std::string& where, const std::vector<redis::DoctorFinding>& findings) {
  if (g.json) {
    wire::JsonWriter w;
    w.BeginObject().Key("problems").BeginArray();
    for (const auto& f : findings) {
      w.BeginObject().Key("node").String(f.node).Key("problem").String(f.problem).Key("fix").String(f.fix).EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
  } else if (findings.empty()) {
    std::printf("%s: no setting found that can lose or delay jobs\n", where.c_str());
  } else {
    for (const auto& f : findings) {
      std::printf("PROBLEM  %s: %s\n    fix: %s\n", f.node.c_str(), f.problem.c_str(), f.fix.c_str());
    }
    std::printf("%zu problem%s found\n", findings.size(), findings.size() == 1 ? "" : "s");
  }
  return findings.empty() ? 0 : kExitFailure;
}

int DoctorPostgres(const Global& g, const std::string& url) {
  auto findings = postgres::Doctor(url);
  if (!findings.ok()) return Fail(findings.status());
  std::vector<redis::DoctorFinding> out;
  for (const auto& f : *findings) out.push_back({f.setting, f.problem, f.fix});
  return Report(g, postgres::RedactUrl(url), out);
}

}  // namespace

void AddMigrateCommand(CLI::App& app, int& rc) {
  auto url = std::make_shared<std::string>();
  auto* c = app.add_subcommand("migrate", "Create or upgrade the schema delayq in a PostgreSQL database");
  c->add_option("url", *url, "postgres://USER[:PASSWORD]@HOST:PORT/DB[?sslmode=...] (or the password in PGPASSWORD)")
      ->required();
  c->callback([url, &rc] {
    if (!IsPostgres(*url)) {
      rc = Fail(Status::InvalidArgument(fmt::format(
          "\"{}\" is not a PostgreSQL URL; give postgres://USER@HOST:PORT/DB (only the PostgreSQL store has a schema)",
          postgres::RedactUrl(*url))));
      return;
    }
    auto c = postgres::Connection::Open(*url, 10);
    if (!c.ok()) {
      rc = Fail(c.status());
      return;
    }
    auto report = postgres::Migrate(**c);
    if (!report.ok()) {
      rc = Fail(report.status());
      return;
    }
    if (report->from == report->to) {
      std::printf("schema delayq is at version %d, this delayq's: nothing to do\n", report->to);
    } else {
      std::printf("schema delayq migrated from version %d to %d\n", report->from, report->to);
    }
    if (!report->producer_role.empty()) std::printf("note: %s\n", report->producer_role.c_str());
    rc = 0;
  });
}

void AddDoctorCommand(CLI::App& app, Global& g, int& rc) {
  auto url = std::make_shared<std::string>();
  auto password_file = std::make_shared<std::string>();
  auto* c = app.add_subcommand("doctor", "Check a Redis or PostgreSQL for settings that lose or delay jobs");
  c->add_option("url", *url,
                "redis://[USER:PASSWORD@]HOST:PORT, rediss://... (TLS), redis-sentinel://H:P,.../MASTER, "
                "redis-cluster://H:P,... or postgres://USER@HOST:PORT/DB")
      ->required();
  c->add_option("--redis-password-file", *password_file,
                "Redis' password when the URL gives none (else the environment's DELAYQ_REDIS_PASSWORD)")
      ->check(CLI::ExistingFile);
  c->callback([url, password_file, &g, &rc] {
    if (IsPostgres(*url)) {
      rc = DoctorPostgres(g, *url);
      return;
    }
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
    rc = Report(g, redis::RedisUrl::Redacted(*url), *findings);
  });
}

}  // namespace delayq::cli
