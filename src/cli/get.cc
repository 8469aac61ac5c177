// `delayq get QUEUE ID` (or --key K): a job as it is now.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddGetCommand(CLI::App& app, Global& g, int& rc) {
  auto a = std::make_shared<JobArgs>();
  auto* c = app.add_subcommand("get", "Show a job: delayq get orders 01J... (or --key K)");
  a->Add(c);
  c->callback(Run(rc, [a, &g]() -> Status {
    auto ref = a->Ref();
    if (!ref.ok()) return ref.status();
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto job = (*client)->Get(a->queue, *ref);
    if (!job.ok()) return job.status();
    PrintJob(*job, g.json);
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
