// The `delayq` command: the global options and every subcommand, each in a file of its own
// (cli_common.h lists them).
#include <sys/resource.h>
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "cli/cli_common.h"
#include "cli/config_file.h"
#include "cli/exit_codes.h"
#include "core/version.h"

namespace delayq::cli {
namespace {

void RaiseOpenFileLimit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
    l.rlim_cur = l.rlim_max;
    setrlimit(RLIMIT_NOFILE, &l);
  }
}

}  // namespace

int Main(int argc, char** argv) {
  RaiseOpenFileLimit();
  LogOptions log;
  SetUpLogging(log);
  CLI::App app{
      "delayq: a delay queue. Jobs become deliverable at a chosen time and are "
      "delivered at least once, retried with back-off, dead-lettered when out of "
      "attempts."};
  app.footer(kExitCodesHelp);
  app.set_version_flag("--version", fmt::format("delayq {} (commit {})", Version(), Commit()),
                       "Print delayq's version and the commit it was built from");
  app.require_subcommand(1);
  app.fallthrough();
  Global g;
  if (const char* url = std::getenv("DELAYQ_URL")) g.server = url;
  app.add_option("--server", g.server, "Server URL (or DELAYQ_URL)")->capture_default_str();
  app.add_option("--token", g.token, "Bearer token (or DELAYQ_AUTH_TOKEN)")->envname("DELAYQ_AUTH_TOKEN");
  app.add_option("--ca-file", g.ca_file, "With an https:// server: trust the CAs in this PEM file (or DELAYQ_CA_FILE)")
      ->envname("DELAYQ_CA_FILE");
  app.add_option("--client-cert", g.client_cert,
                 "With a server that asks for one (serve --tls-client-ca): this PEM client certificate "
                 "(or DELAYQ_CLIENT_CERT)")
      ->envname("DELAYQ_CLIENT_CERT");
  app.add_option("--client-key", g.client_key, "The PEM key of --client-cert, if not in it (or DELAYQ_CLIENT_KEY)")
      ->envname("DELAYQ_CLIENT_KEY");
  app.add_option("--server-name", g.server_name,
                 "With https://: the name the server's certificate must carry, if not the URL's host "
                 "(or DELAYQ_SERVER_NAME)")
      ->envname("DELAYQ_SERVER_NAME");
  app.add_flag("--json", g.json, "Print the server's JSON instead of text");
  AddLogOptions(app, log);
  // Before any command's callback runs (serve logs from its own).
  app.parse_complete_callback([&log] { SetUpLogging(log); });
  int rc = 0;
  AddServeCommand(app, rc);
  AddEnqueueCommand(app, g, rc);
  AddGetCommand(app, g, rc);
  AddWaitCommand(app, g, rc);
  AddCancelCommand(app, g, rc);
  AddRescheduleCommand(app, g, rc);
  AddStatsCommand(app, g, rc);
  AddPauseCommands(app, g, rc);
  AddDeleteQueueCommand(app, g, rc);
  AddConfigCommand(app, g, rc);
  AddReserveCommand(app, g, rc);
  AddAckCommand(app, g, rc);
  AddNackCommand(app, g, rc);
  AddTouchCommand(app, g, rc);
  AddDeadCommand(app, g, rc);
  AddScheduleCommand(app, g, rc);
  AddJobsCommand(app, g, rc);
  AddDoctorCommand(app, g, rc);
  AddMigrateCommand(app, rc);
  AddWorkCommand(app, g, rc);
  AddBenchCommand(app, g, rc);
  AddForwardCommand(app, rc);
  AddCompletionCommand(app, rc);
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    if (std::string_view(argv[i]) == "--json") SetJsonErrors(true);
  }
  LoadedConfig config_file;
  if (Status s = LoadServeConfigFile(*app.get_subcommand("serve"), argc, argv, &config_file); !s.ok()) return Fail(s);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string message = TypoHint(app, argc, argv);
    if (message.empty()) {
      message = fmt::format("{}{}; see `delayq --help`", e.what(), ConfigFileNote(config_file, e.what()));
    }
    return Fail(Status::InvalidArgument(message));
  }
  return rc;
}

}  // namespace delayq::cli

int main(int argc, char** argv) { return delayq::cli::Main(argc, argv); }
