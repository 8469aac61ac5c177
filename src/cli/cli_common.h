// What the CLI's commands share: the global options, the client, argument parsing, text/JSON
// output, and the commands themselves (one file each: AddXCommand in x.cc).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "delayq/client.h"

namespace delayq::cli {

struct Global {
  std::string server = "http://127.0.0.1:7070";
  std::string token;
  std::string ca_file;                               // https: trust this PEM CA file (DELAYQ_CA_FILE)
  std::string client_cert, client_key, server_name;  // https: mutual TLS, the certificate's name
  bool json = false;
};

// --log-format and --log-level (logging.cc): every command logs to stderr, in UTC.
struct LogOptions {
  std::string format = "text";  // text | json
  std::string level = "info";
};
void AddLogOptions(CLI::App& app, LogOptions& options);
// Installs the logger as `options` say; called before parsing (defaults) and after.
void SetUpLogging(const LogOptions& options);

Result<std::unique_ptr<Client>> MakeClient(const Global& g);
// Prints the error to stderr and returns its exit code: "delayq: MESSAGE", or with --json
// {"error": {"code": "not_found", "message": "..."}} (the server's error shape).
int Fail(const Status& s);
// Whether errors are printed as JSON (--json anywhere before a `--`); set by Main before parsing,
// so that a command-line error is JSON too.
void SetJsonErrors(bool json);
// kNotFound saying that `queue` does not exist yet, naming the existing queue nearest to it, when
// it does not exist; nullopt when it does (or the server cannot say). missing_queue.cc.
std::optional<Status> MissingQueue(Queue& client, const std::string& queue);
// When the command line has a mistyped subcommand or option: what to say about it (naming the
// nearest known one), else "". typos.cc.
std::string TypoHint(CLI::App& app, int argc, char** argv);
// A subcommand's callback from `fn` (returning a Status): a failure is printed and sets `rc`.
template <class Fn>
std::function<void()> Run(int& rc, Fn fn) {
  return [&rc, fn] {
    Status s = fn();
    if (!s.ok()) rc = Fail(s);
  };
}

// --- arguments (args.cc) ---
// "30m" style durations and --at times (RFC 3339 or epoch ms) for CLI11 options; a bad one throws
// CLI::ValidationError with the parser's message.
int64_t Duration(const std::string& option, const std::string& text);
int64_t Timestamp(const std::string& option, const std::string& text);
std::string ReadAll(std::istream& in);
// QUEUE ID, or QUEUE --key K.
struct JobArgs {
  std::string queue, id, key;
  void Add(CLI::App* command);
  Result<JobRef> Ref() const;
};

// "2026-12-01T10:00:00.000Z (in 29m59s)"
std::string WhenText(int64_t epoch_ms);
// "29m59s": whole seconds above a minute, milliseconds below.
std::string HumanDuration(int64_t ms);

void PrintJob(const Job& job, bool json);
void PrintDeadJobs(const std::vector<Job>& jobs, bool json);
// A page of a listing: one row per job, then (text) how to get the next page, `more_hint`, when
// there is one; JSON as the API answers it.
void PrintJobPage(const JobPage& page, JobState state, bool json, const std::string& more_hint);
void PrintDeliveries(const std::vector<Delivery>& jobs, bool json);
void PrintStats(const std::vector<QueueStats>& stats, bool json, bool one);
void PrintConfig(const std::string& queue, const QueueConfig& c, bool json);

// Parses the command line and runs the command; returns the exit code (exit_codes.h). main.cc.
int Main(int argc, char** argv);

// The commands, each in its own file, named like it.
void AddServeCommand(CLI::App& app, int& rc);
void AddEnqueueCommand(CLI::App& app, Global& g, int& rc);
void AddGetCommand(CLI::App& app, Global& g, int& rc);
void AddWaitCommand(CLI::App& app, Global& g, int& rc);
void AddCancelCommand(CLI::App& app, Global& g, int& rc);
void AddRescheduleCommand(CLI::App& app, Global& g, int& rc);
void AddStatsCommand(CLI::App& app, Global& g, int& rc);
void AddPauseCommands(CLI::App& app, Global& g, int& rc);  // pause and resume: pause.cc
void AddDeleteQueueCommand(CLI::App& app, Global& g, int& rc);
void AddConfigCommand(CLI::App& app, Global& g, int& rc);
void AddReserveCommand(CLI::App& app, Global& g, int& rc);
void AddAckCommand(CLI::App& app, Global& g, int& rc);
void AddNackCommand(CLI::App& app, Global& g, int& rc);
void AddTouchCommand(CLI::App& app, Global& g, int& rc);
void AddDeadCommand(CLI::App& app, Global& g, int& rc);
void AddScheduleCommand(CLI::App& app, Global& g, int& rc);  // set | ls | get | rm | pause | resume
void AddJobsCommand(CLI::App& app, Global& g, int& rc);      // dead list | replay | purge
void AddDoctorCommand(CLI::App& app, Global& g, int& rc);
void AddMigrateCommand(CLI::App& app, int& rc);
void AddWorkCommand(CLI::App& app, Global& g, int& rc);
void AddBenchCommand(CLI::App& app, Global& g, int& rc);
void AddForwardCommand(CLI::App& app, int& rc);
void AddCompletionCommand(CLI::App& app, int& rc);  // after every other command: it lists them

}  // namespace delayq::cli
