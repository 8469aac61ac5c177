// `delayq dead list|replay|purge QUEUE`: the dead-letter queue.
#include <unistd.h>

#include <iostream>

#include "cli/cli_common.h"

namespace delayq::cli {

void AddDeadCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue;
    int32_t limit = 100;
    std::string cursor;
    std::vector<std::string> ids;
    bool yes = false;
  };
  auto a = std::make_shared<Args>();
  auto* dead = app.add_subcommand("dead", "The dead-letter queue: list, replay, purge");
  dead->require_subcommand(1);

  auto* list = dead->add_subcommand("list", "Dead jobs, oldest first");
  list->add_option("queue", a->queue, "Queue name")->required();
  list->add_option("--limit", a->limit, "At most this many (1-1000)")->capture_default_str();
  list->add_option("--cursor", a->cursor, "Continue after a page: the cursor it printed");
  list->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto page = (*client)->ListJobs(a->queue, ListRequest{JobState::kDead, a->limit, a->cursor});
    if (!page.ok()) return page.status();
    if (g.json) {
      PrintJobPage(*page, JobState::kDead, true, "");
      return Status::Ok();
    }
    PrintDeadJobs(page->jobs, false);
    if (!page->next_cursor.empty()) {
      std::printf("more: delayq dead list %s --limit %d --cursor %s\n", a->queue.c_str(), a->limit,
                  page->next_cursor.c_str());
    }
    return Status::Ok();
  }));

  auto* replay = dead->add_subcommand("replay", "Make dead jobs ready again (all, or the ids given)");
  replay->add_option("queue", a->queue, "Queue name")->required();
  replay->add_option("ids", a->ids, "Job ids (none: all)");
  replay->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto n = (*client)->ReplayDead(a->queue, a->ids);
    if (!n.ok()) return n.status();
    std::printf(g.json ? "{\"replayed\":%lld}\n" : "replayed %lld\n", static_cast<long long>(*n));
    return Status::Ok();
  }));

  auto* purge = dead->add_subcommand("purge", "Delete every dead job of a queue");
  purge->add_option("queue", a->queue, "Queue name")->required();
  purge->add_flag("--yes", a->yes, "Do not ask");
  purge->callback(Run(rc, [a, &g]() -> Status {
    if (!a->yes) {
      if (!isatty(STDIN_FILENO))
        return Status::InvalidArgument("purge deletes dead jobs for good; add --yes to confirm");
      std::fprintf(stderr, "delete every dead job of %s? [y/N] ", a->queue.c_str());
      std::string answer;
      std::getline(std::cin, answer);
      if (answer != "y" && answer != "Y" && answer != "yes") {
        std::fprintf(stderr, "nothing deleted\n");
        return Status::Ok();
      }
    }
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto n = (*client)->PurgeDead(a->queue);
    if (!n.ok()) return n.status();
    std::printf(g.json ? "{\"purged\":%lld}\n" : "purged %lld\n", static_cast<long long>(*n));
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
