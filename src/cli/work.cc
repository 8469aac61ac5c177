// `delayq work QUEUE -- CMD ARGS...`: a Worker whose handler runs CMD once per job with the
// payload on stdin. Exit status 0 acks; anything else nacks (the queue's back-off decides when
// it is retried, the end of stderr becomes last_error). Leases are kept alive while CMD runs.
// SIGINT/SIGTERM: stop taking jobs, let the commands running finish, exit 0.
#include <signal.h>

#include <cctype>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "cli/cli_common.h"
#include "cli/run_command.h"
#include "core/duration.h"
#include "delayq/worker.h"

namespace delayq::cli {

void AddWorkCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue, lease, wait = "20s";
    int concurrency = 1;
    std::vector<std::string> command;
  };
  auto args = std::make_shared<Args>();
  auto* w = app.add_subcommand("work",
                               "Run a command for each job: delayq work orders --concurrency 8 -- ./handle.sh "
                               "(payload on stdin; exit 0 acks, anything else nacks)");
  w->add_option("queue", args->queue, "Queue name")->required();
  w->add_option("--concurrency", args->concurrency, "Commands running at once")->capture_default_str();
  w->add_option("--lease", args->lease, "Lease per job, kept alive while the command runs");
  w->add_option("--wait", args->wait, "Long-poll wait per reserve")->capture_default_str();
  w->add_option("command", args->command, "The command and its arguments (after --)")->required();
  w->footer(
      "The command gets the job's payload on stdin, and in its environment: DELAYQ_QUEUE, DELAYQ_JOB_ID, "
      "DELAYQ_ATTEMPT (this delivery's attempt, 1 on the first), DELAYQ_MAX_ATTEMPTS, DELAYQ_DUE_AT (epoch ms), "
      "DELAYQ_KEY (empty without a key) and DELAYQ_HEADER_<NAME> for each header (the name upper-cased, every "
      "character but letters and digits made _). Exit status 0 acks the job; any other nacks it, with the last "
      "line of the command's stderr as its last_error. The lease is kept alive while the command runs.");
  w->callback([args, &g, &rc] {
    auto client = MakeClient(g);
    if (!client.ok()) {
      rc = Fail(client.status());
      return;
    }
    Status ping = (*client)->Ping();
    if (!ping.ok()) {
      rc = Fail(ping);
      return;
    }
    // A worker may well start before the first job is enqueued: a missing queue is only a warning.
    if (auto missing = MissingQueue(**client, args->queue)) {
      std::fprintf(stderr, "delayq work: %s; waiting for its first job\n", missing->message().c_str());
    }
    WorkerOptions options;
    options.concurrency = args->concurrency;
    if (!args->lease.empty()) {
      auto d = ParseDuration(args->lease);
      if (!d.ok()) throw CLI::ValidationError("--lease", d.status().message());
      options.lease_ms = *d;
    }
    auto wait = ParseDuration(args->wait);
    if (!wait.ok()) throw CLI::ValidationError("--wait", wait.status().message());
    options.wait_ms = *wait;
    // SIGINT/SIGTERM go to one thread (sigwait) rather than interrupting the workers.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    const std::string queue = args->queue;
    Worker worker(
        **client, queue,
        [args, queue](const Delivery& job) {
          std::map<std::string, std::string> env = {
              {"DELAYQ_QUEUE", queue},
              {"DELAYQ_JOB_ID", job.id},
              {"DELAYQ_ATTEMPT", std::to_string(job.attempt)},
              {"DELAYQ_MAX_ATTEMPTS", std::to_string(job.max_attempts)},
              {"DELAYQ_DUE_AT", std::to_string(job.due_at_ms)},
              {"DELAYQ_KEY", job.key},
          };
          for (const auto& [name, value] : job.headers) {
            std::string var = "DELAYQ_HEADER_";
            for (char c : name)
              var.push_back(std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_');
            env[var] = value;
          }
          CommandResult r = RunCommand(args->command, job.payload, env);
          if (!r.error.empty()) throw std::runtime_error(r.error);
          if (r.exit_status != 0) {
            std::string tail = r.stderr_tail;
            while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
            auto nl = tail.rfind('\n');
            if (nl != std::string::npos) tail = tail.substr(nl + 1);
            throw std::runtime_error("exit status " + std::to_string(r.exit_status) +
                                     (tail.empty() ? "" : ": " + tail));
          }
        },
        options);
    worker.Start();
    std::fprintf(stderr, "delayq work: %s, %d at a time, from %s (Ctrl-C stops after the running jobs)\n",
                 queue.c_str(), args->concurrency, g.server.c_str());
    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::fprintf(stderr, "delayq work: stopping; waiting for the running commands\n");
    worker.Stop();
    WorkerStats s = worker.stats();
    std::fprintf(stderr, "delayq work: acked %llu, nacked %llu, errors %llu\n",
                 static_cast<unsigned long long>(s.acked), static_cast<unsigned long long>(s.nacked),
                 static_cast<unsigned long long>(s.errors));
    rc = 0;
  });
}

}  // namespace delayq::cli
