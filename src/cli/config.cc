// `delayq config QUEUE [--max-attempts N --lease 30s --rate 50 ...]`: shows a queue's config,
// changing the fields given first.
#include "cli/cli_common.h"

namespace delayq::cli {

void AddConfigCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue, lease, backoff_base, backoff_max, dead_retention, max_delay, priority_aging, keep_completed;
    std::optional<int32_t> max_attempts;
    std::optional<double> factor, jitter;
    std::optional<int64_t> max_payload, burst, max_reserved, group_max_reserved;
    std::optional<double> rate;
  };
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("config", "Show a queue's config, or change it with the options");
  c->add_option("queue", a->queue, "Queue name")->required();
  c->add_option("--max-attempts", a->max_attempts, "Deliveries before a job goes dead");
  c->add_option("--lease", a->lease, "Default lease of a reserve, e.g. 30s");
  c->add_option("--backoff-base", a->backoff_base, "First retry delay, e.g. 1s");
  c->add_option("--backoff-factor", a->factor, "Growth per attempt, e.g. 2");
  c->add_option("--backoff-max", a->backoff_max, "Longest retry delay, e.g. 1h");
  c->add_option("--jitter", a->jitter, "Random spread of retry delays, 0..1");
  c->add_option("--max-payload", a->max_payload, "Largest payload in bytes");
  c->add_option("--dead-retention", a->dead_retention, "Keep dead jobs this long, e.g. 7d");
  c->add_option("--max-delay", a->max_delay, "Longest delay accepted, e.g. 365d");
  c->add_option("--rate", a->rate, "Deliveries per second at most (a token bucket); 0: no limit");
  c->add_option("--burst", a->burst, "Most deliveries at once after a pause (the bucket); 0: the rate");
  c->add_option("--max-reserved", a->max_reserved, "Jobs leased at once at most; 0: no limit");
  c->add_option("--group-max-reserved", a->group_max_reserved, "Jobs of one group leased at once at most; 0: no limit");
  c->add_option("--priority-aging", a->priority_aging,
                "A ready job gains a priority level per this long due, e.g. 60s; 0ms: strict priorities");
  c->add_option("--keep-completed", a->keep_completed,
                "Keep acked jobs this long as completed, with their results, e.g. 1d (at most 30d); 0ms: delete them");
  c->callback(Run(rc, [a, &g]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto config = (*client)->GetConfig(a->queue);
    if (!config.ok()) return config.status();
    bool change = false;
    auto set_ms = [&](const std::string& text, const char* opt, int64_t* field) {
      if (text.empty()) return;
      *field = Duration(opt, text);
      change = true;
    };
    set_ms(a->lease, "--lease", &config->lease_ms);
    set_ms(a->backoff_base, "--backoff-base", &config->backoff.base_ms);
    set_ms(a->backoff_max, "--backoff-max", &config->backoff.max_ms);
    set_ms(a->dead_retention, "--dead-retention", &config->dead_retention_ms);
    set_ms(a->max_delay, "--max-delay", &config->max_delay_ms);
    set_ms(a->priority_aging, "--priority-aging", &config->priority_aging_ms);
    set_ms(a->keep_completed, "--keep-completed", &config->keep_completed_ms);
    if (a->max_attempts) config->max_attempts = *a->max_attempts, change = true;
    if (a->factor) config->backoff.factor = *a->factor, change = true;
    if (a->jitter) config->backoff.jitter = *a->jitter, change = true;
    if (a->max_payload) config->max_payload = *a->max_payload, change = true;
    if (a->rate) config->rate_per_s = *a->rate, change = true;
    if (a->burst) config->burst = *a->burst, change = true;
    if (a->max_reserved) config->max_reserved = *a->max_reserved, change = true;
    if (a->group_max_reserved) config->group_max_reserved = *a->group_max_reserved, change = true;
    if (change) DELAYQ_RETURN_IF_ERROR((*client)->SetConfig(a->queue, *config));
    PrintConfig(a->queue, *config, g.json);
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
