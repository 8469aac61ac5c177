// `delayq reschedule QUEUE ID (--delay D | --at T)`: a new due time for a scheduled or ready job.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddRescheduleCommand(CLI::App& app, Global& g, int& rc) {
  struct Args : JobArgs {
    std::string delay, at;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("reschedule", "Give a scheduled or ready job a new due time");
  a->Add(c);
  c->add_option("--delay", a->delay, "Due after this long from now");
  c->add_option("--at", a->at, "Due at this time");
  c->callback(Run(rc, [a, &g]() -> Status {
    auto ref = a->Ref();
    if (!ref.ok()) return ref.status();
    if (a->delay.empty() == a->at.empty()) return Status::InvalidArgument("give --delay or --at (one of them)");
    When when;
    if (!a->delay.empty()) when.delay_ms = Duration("--delay", a->delay);
    if (!a->at.empty()) when.deliver_at_ms = Timestamp("--at", a->at);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto job = (*client)->Reschedule(a->queue, *ref, when);
    if (!job.ok()) return job.status();
    PrintJob(*job, g.json);
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
