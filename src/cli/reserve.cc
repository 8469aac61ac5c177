// `delayq reserve QUEUE [--max N] [--wait 20s] [--lease 30s]`: takes ready jobs and prints their
// receipts.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddReserveCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue, wait = "0s", lease;
    int32_t max = 1;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("reserve", "Take ready jobs (prints their receipts)");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_option("--max", a->max, "Jobs at most")->capture_default_str();
  c->add_option("--wait", a->wait, "Wait this long for a job, e.g. 20s")->capture_default_str();
  c->add_option("--lease", a->lease, "Lease, e.g. 30s (default: the queue's)");
  c->callback(Run(rc, [a, &g]() -> Status {
    ReserveRequest r;
    r.max = a->max;
    r.wait_ms = Duration("--wait", a->wait);
    if (!a->lease.empty()) r.lease_ms = Duration("--lease", a->lease);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto jobs = (*client)->Reserve(a->queue, r);
    if (!jobs.ok()) return jobs.status();
    if (jobs->empty()) {
      if (auto missing = MissingQueue(**client, a->queue)) return *missing;  // and created none
    }
    PrintDeliveries(*jobs, g.json);
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
