// `delayq ack QUEUE RECEIPT... [--result JSON]`: acknowledges deliveries (each with the result, kept
// while the queue keeps completed jobs); each refused receipt is named on stderr.
#include "cli/cli_common.h"
#include "core/validate.h"

namespace delayq::cli {

void AddAckCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue;
    std::vector<std::string> receipts;
    std::optional<std::string> result;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("ack", "Acknowledge deliveries by receipt");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_option("receipts", a->receipts, "Receipts")->required();
  c->add_option("--result", a->result,
                "The jobs' result, any JSON value (at most 64 KiB), e.g. '{\"charged\": 1999}'; kept with each job "
                "while the queue keeps completed jobs (config --keep-completed)");
  c->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    if (a->result) DELAYQ_RETURN_IF_ERROR(ValidateResult(*a->result, "--result"));
    std::vector<AckRequest> requests;
    for (const auto& r : a->receipts) requests.push_back({r, a->result});
    auto results = (*client)->AckBatch(a->queue, requests);
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
