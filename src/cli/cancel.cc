// `delayq cancel QUEUE ID` (or --key K): deletes a scheduled, ready or dead job.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddCancelCommand(CLI::App& app, Global& g, int& rc) {
  auto a = std::make_shared<JobArgs>();
  auto* c = app.add_subcommand("cancel", "Delete a scheduled, ready or dead job");
  a->Add(c);
  c->callback(Run(rc, [a, &g]() -> Status {
    auto ref = a->Ref();
    if (!ref.ok()) return ref.status();
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    DELAYQ_RETURN_IF_ERROR((*client)->Cancel(a->queue, *ref));
    if (g.json) {
      std::printf("{\"cancelled\":true}\n");
    } else {
      std::printf("cancelled %s\n", a->id.empty() ? ("key " + a->key).c_str() : a->id.c_str());
    }
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
