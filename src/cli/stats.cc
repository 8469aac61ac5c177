// `delayq stats [QUEUE]`: counts, counters and lateness of one queue, or of every queue.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddStatsCommand(CLI::App& app, Global& g, int& rc) {
  auto queue = std::make_shared<std::string>();
  auto* c = app.add_subcommand("stats", "Queue counts, counters and lateness (all queues without a name)");
  c->add_option("queue", *queue, "Queue name");
  c->callback(Run(rc, [queue, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    std::vector<QueueStats> list;
    if (queue->empty()) {
      auto all = (*client)->ListQueues();
      if (!all.ok()) return all.status();
      list = std::move(*all);
    } else {
      auto one = (*client)->Stats(*queue);
      if (!one.ok()) return one.status();
      list.push_back(std::move(*one));
    }
    PrintStats(list, g.json, !queue->empty());
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
