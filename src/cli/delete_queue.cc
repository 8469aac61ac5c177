// `delayq delete-queue QUEUE [--force]`: an empty queue and its config; with --force its jobs too.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddDeleteQueueCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("delete-queue", "Delete a queue and its config (it must hold no job unless --force)");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_flag("--force", a->force, "Delete its jobs too: scheduled, ready, reserved and dead");
  c->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto deleted = (*client)->DeleteQueue(a->queue, a->force);
    if (!deleted.ok()) return deleted.status();
    if (g.json) {
      std::printf("{\"deleted\":true,\"jobs\":%lld}\n", static_cast<long long>(*deleted));
    } else {
      std::printf("deleted queue %s (%lld jobs)\n", a->queue.c_str(), static_cast<long long>(*deleted));
    }
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
