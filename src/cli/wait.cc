// `delayq wait QUEUE ID [--timeout 60s]` (or --key K): waits for the job's outcome (completed with
// its result, dead or cancelled) and shows the job; when the timeout ends first, the job as it is,
// with exit code 8.
#include <chrono>
#include <thread>

#include "cli/cli_common.h"
#include "cli/exit_codes.h"

namespace delayq::cli {
namespace {

// Waits of at most a minute each until `timeout_ms`, asking again over a server's restart (503)
// or a full server (429), as the Python and Node clients' wait does.
Result<Job> WaitFor(Queue& client, const std::string& queue, JobRef ref, int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::milliseconds(100);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    auto job = client.WaitOutcome(queue, ref, std::clamp<int64_t>(left, 0, Limits::kMaxWaitMs));
    const bool again = job.code() == Code::kUnavailable || job.code() == Code::kResourceExhausted;
    if (again && Clock::now() + pause < deadline) {
      std::this_thread::sleep_for(pause);  // a server starting again, or one at --max-waiting
      pause = std::min(pause * 2, std::chrono::milliseconds(2000));
      continue;
    }
    if (!job.ok() || IsFinal(job->state) || Clock::now() >= deadline) return job;
    ref = JobRef::ById(job->id);  // a wait by key waits for the job the key named when it began
  }
}

}  // namespace

void AddWaitCommand(CLI::App& app, Global& g, int& rc) {
  auto a = std::make_shared<JobArgs>();
  auto timeout = std::make_shared<std::string>("60s");
  auto* c = app.add_subcommand(
      "wait", "Wait for a job's outcome (completed, dead or cancelled): delayq wait orders 01J... --timeout 5m");
  a->Add(c);
  c->add_option("--timeout", *timeout, "Wait at most this long; then show the job as it is")->capture_default_str();
  c->callback(Run(rc, [a, timeout, &g, &rc]() -> Status {
    auto ref = a->Ref();
    if (!ref.ok()) return ref.status();
    const int64_t timeout_ms = Duration("--timeout", *timeout);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto job = WaitFor(**client, a->queue, *ref, timeout_ms);
    if (!job.ok()) return job.status();
    PrintJob(*job, g.json);
    if (!IsFinal(job->state)) rc = kExitNoOutcome;  // shown as it is; a script tells it from an outcome
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
