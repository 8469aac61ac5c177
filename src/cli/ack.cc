// `delayq ack QUEUE RECEIPT...`: acknowledges deliveries; each refused receipt is named on stderr.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddAckCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue;
    std::vector<std::string> receipts;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("ack", "Acknowledge deliveries by receipt");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_option("receipts", a->receipts, "Receipts")->required();
  c->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto results = (*client)->AckBatch(a->queue, a->receipts);
    Status first;
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].ok()) continue;
      std::fprintf(stderr, "delayq: %s: %s\n", a->receipts[i].c_str(), results[i].message().c_str());
      if (first.ok()) first = results[i];
    }
    if (!first.ok()) return Status(first.code(), "not every receipt was acked");
    std::printf(g.json ? "{\"acked\":%zu}\n" : "acked %zu\n", results.size());
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
