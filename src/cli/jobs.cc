// `delayq jobs ls QUEUE --state S`: browse a queue's jobs in one state, a page at a time.
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "wire/job.h"

namespace delayq::cli {

void AddJobsCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue;
    std::string state = "scheduled";
    int32_t limit = 100;
    std::string cursor;
    bool all = false;
  };
  auto a = std::make_shared<Args>();
  auto* jobs = app.add_subcommand("jobs", "Browse a queue's jobs by state");
  jobs->require_subcommand(1);
  auto* ls = jobs->add_subcommand("ls", "List jobs in one state: delayq jobs ls orders --state ready");
  ls->alias("list");
  ls->add_option("queue", a->queue, "Queue name")->required();
  ls->add_option("--state", a->state, "scheduled, ready, reserved, dead or completed")
      ->check(CLI::IsMember({"scheduled", "ready", "reserved", "dead", "completed"}))
      ->capture_default_str();
  ls->add_option("--limit", a->limit, "Jobs per page (1-1000)")->capture_default_str();
  ls->add_option("--cursor", a->cursor, "Continue after a page: the cursor it printed");
  ls->add_flag("--all", a->all, "Follow the cursors to the last page");
  ls->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    ListRequest request{*ParseJobState(a->state), a->limit, a->cursor};
    JobPage all;
    while (true) {
      auto page = (*client)->ListJobs(a->queue, request);
      if (!page.ok()) return page.status();
      all.jobs.insert(all.jobs.end(), std::make_move_iterator(page->jobs.begin()),
                      std::make_move_iterator(page->jobs.end()));
      all.next_cursor = page->next_cursor;
      if (!a->all || page->next_cursor.empty()) break;
      request.cursor = page->next_cursor;
      if (!g.json) {  // a page at a time, so a long listing shows at once and holds no memory
        PrintJobPage(all, request.state, false, /*more_hint=*/"");
        all.jobs.clear();
      }
    }
    const std::string hint = all.next_cursor.empty()
                                 ? ""
                                 : fmt::format("delayq jobs ls {} --state {} --limit {} --cursor {}", a->queue,
                                               a->state, a->limit, all.next_cursor);
    PrintJobPage(all, request.state, g.json, hint);
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
