// `delayq touch QUEUE RECEIPT [--lease 60s]`: extends the lease of a delivery.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddTouchCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue, receipt, lease;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("touch", "Extend the lease of a delivery");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_option("receipt", a->receipt, "Receipt")->required();
  c->add_option("--lease", a->lease, "New lease from now (default: the queue's)");
  c->callback(Run(rc, [a, &g]() -> Status {
    std::optional<int64_t> lease;
    if (!a->lease.empty()) lease = Duration("--lease", a->lease);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto t = (*client)->Touch(a->queue, a->receipt, lease);
    if (!t.ok()) return t.status();
    std::printf(g.json ? "{\"lease_deadline\":%lld}\n" : "lease until %lld\n",
                static_cast<long long>(t->lease_deadline_ms));
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
