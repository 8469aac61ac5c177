// `delayq touch QUEUE RECEIPT [--lease 60s] [--progress JSON]`: extends the lease of a delivery
// and reports its progress.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddTouchCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue, receipt, lease;
    std::optional<std::string> progress;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("touch", "Extend the lease of a delivery");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_option("receipt", a->receipt, "Receipt")->required();
  c->add_option("--lease", a->lease, "New lease from now (default: the queue's)");
  c->add_option("--progress", a->progress,
                "How far the work has got, shown on the job while this delivery holds it: a JSON value of at most "
                "4 KiB, e.g. 0.5 or '{\"rows\": 120}'");
  c->callback(Run(rc, [a, &g]() -> Status {
    std::optional<int64_t> lease;
    if (!a->lease.empty()) lease = Duration("--lease", a->lease);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto t = (*client)->Touch(a->queue, TouchRequest{a->receipt, lease, a->progress});
    if (!t.ok()) return t.status();
    if (g.json) {
      std::printf("{\"lease_deadline\":%lld}\n", static_cast<long long>(t->lease_deadline_ms));
    } else {
      std::printf("lease until %s\n", WhenText(t->lease_deadline_ms).c_str());
    }
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
