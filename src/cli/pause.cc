// `delayq pause QUEUE` and `delayq resume QUEUE`, twins: while paused, jobs still come due but
// none is handed out.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddPauseCommands(CLI::App& app, Global& g, int& rc) {
  for (const bool pause : {true, false}) {
    auto queue = std::make_shared<std::string>();
    auto* c =
        app.add_subcommand(pause ? "pause" : "resume", pause ? "Stop handing out jobs of a queue (they still come due)"
                                                             : "Hand out jobs of a paused queue again");
    c->add_option("queue", *queue, "Queue name")->required();
    c->callback(Run(rc, [queue, pause, &g]() -> Status {
      auto client = MakeClient(g);
      if (!client.ok()) return client.status();
      DELAYQ_RETURN_IF_ERROR(pause ? (*client)->Pause(*queue) : (*client)->Resume(*queue));
      if (g.json) {
        std::printf("{\"paused\":%s}\n", pause ? "true" : "false");
      } else {
        std::printf("%s %s\n", pause ? "paused" : "resumed", queue->c_str());
      }
      return Status::Ok();
    }));
  }
}

}  // namespace delayq::cli
