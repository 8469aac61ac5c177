// `delayq nack QUEUE RECEIPT [--retry 5s] [--error TEXT] [--dead]`: gives a delivery back, to be
// retried after the back-off (or --retry), or dead.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddNackCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue, receipt, retry, error;
    bool dead = false;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("nack", "Give a delivery back: retried after back-off, or dead");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_option("receipt", a->receipt, "Receipt")->required();
  c->add_option("--retry", a->retry, "Retry after this long instead of the back-off");
  c->add_option("--error", a->error, "Why it failed (kept as last_error)");
  c->add_flag("--dead", a->dead, "Send it to the dead-letter queue now");
  c->callback(Run(rc, [a, &g]() -> Status {
    NackRequest r;
    r.receipt = a->receipt;
    if (!a->retry.empty()) r.retry_in_ms = Duration("--retry", a->retry);
    r.error = a->error;
    r.dead = a->dead;
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto n = (*client)->Nack(a->queue, r);
    if (!n.ok()) return n.status();
    if (g.json) {
      std::printf("{\"state\":\"%s\",\"due_at\":%lld}\n", JobStateName(n->state), static_cast<long long>(n->due_at_ms));
    } else if (n->state == JobState::kDead) {
      std::printf("dead\n");
    } else {
      std::printf("retry due %s\n", WhenText(n->due_at_ms).c_str());
    }
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
