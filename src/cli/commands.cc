// The `delayq` command line: parsing, and the commands that are one API call each.
// `work` is in work.cc, `bench` in bench.cc, `serve` in src/server.
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli/cli_common.h"
#include "cli/exit_codes.h"
#include "core/duration.h"
#include "http/json.h"
#include "store/redis/redis_queue.h"
#include "server/serve.h"

namespace delayq::cli {
namespace {

// Parses "30m" style durations for CLI11 options, with the duration parser's message.
int64_t Duration(const std::string& option, const std::string& text) {
  auto d = ParseDuration(text);
  if (!d.ok()) throw CLI::ValidationError(option, d.status().message());
  return *d;
}

// --at: RFC 3339, or epoch milliseconds.
int64_t Timestamp(const std::string& option, const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() < 16) {
    return std::stoll(text);
  }
  auto t = ParseTimestamp(text);
  if (!t.ok()) throw CLI::ValidationError(option, t.status().message());
  return *t;
}

std::string ReadAll(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The payload of `enqueue`: JSON text is sent as is; other text becomes a JSON string;
// with --base64 (or from a file/stdin that is not JSON) the bytes are sent as binary.
void SetPayload(EnqueueRequest& r, const std::string& text, bool raw_bytes, bool binary) {
  if (binary) {
    r.payload = text;
    r.binary = true;
  } else if (http::IsJsonValue(text)) {
    r.payload = text;
  } else if (raw_bytes) {
    r.payload = text;
    r.binary = true;
  } else {
    http::JsonWriter w;
    w.String(text);
    r.payload = w.Take();
  }
}

void RaiseOpenFileLimit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
    l.rlim_cur = l.rlim_max;
    setrlimit(RLIMIT_NOFILE, &l);
  }
}

struct JobArgs {
  std::string queue, id, key;
  void Add(CLI::App* c) {
    c->add_option("queue", queue, "Queue name")->required();
    c->add_option("id", id, "Job id");
    c->add_option("--key", key, "Address the job by its idempotency key instead of its id");
  }
  Result<JobRef> Ref() const {
    if (id.empty() == key.empty()) {
      return Status::InvalidArgument("give a job id or --key KEY (one of them)");
    }
    return id.empty() ? JobRef::ByKey(key) : JobRef::ById(id);
  }
};

}  // namespace

int Main(int argc, char** argv) {
  RaiseOpenFileLimit();
  spdlog::set_default_logger(spdlog::stderr_color_mt("delayq"));  // stdout is for results
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  CLI::App app{"delayq: a delay queue. Jobs become deliverable at a chosen time and are "
               "delivered at least once, retried with back-off, dead-lettered when out of "
               "attempts."};
  app.footer(kExitCodesHelp);
  app.require_subcommand(1);
  app.fallthrough();
  Global g;
  if (const char* url = std::getenv("DELAYQ_URL")) g.server = url;
  app.add_option("--server", g.server, "Server URL (or DELAYQ_URL)")->capture_default_str();
  app.add_option("--token", g.token, "Bearer token (or DELAYQ_AUTH_TOKEN)")->envname("DELAYQ_AUTH_TOKEN");
  app.add_option("--ca-file", g.ca_file, "With an https:// server: trust the CAs in this PEM file (or DELAYQ_CA_FILE)")
      ->envname("DELAYQ_CA_FILE");
  app.add_flag("--json", g.json, "Print the server's JSON instead of text");
  int rc = 0;
  auto run = [&rc](auto fn) {
    return [&rc, fn] {
      Status s = fn();
      if (!s.ok()) rc = Fail(s);
    };
  };

  // serve ------------------------------------------------------------------------------------
  server::ServeOptions serve;
  std::string durability = "sync";
  auto* s = app.add_subcommand("serve", "Run the delayq server (HTTP API, metrics, dashboard).");
  s->add_option("--listen", serve.listen, "HOST:PORT to listen on")->capture_default_str();
  s->add_option("--data", serve.data, "Directory of the embedded store")->capture_default_str();
  s->add_option("--store", serve.store, "embedded | redis://HOST:PORT | redis-cluster://H:P,...")
      ->capture_default_str();
  s->add_option("--durability", durability, "sync | interval | none")->capture_default_str();
  s->add_option("--sync-interval-ms", serve.sync_interval_ms, "fsync period with --durability interval")
      ->capture_default_str();
  s->add_option("--auth-token", serve.auth_token, "Require this bearer token (or DELAYQ_AUTH_TOKEN)")
      ->envname("DELAYQ_AUTH_TOKEN");
  s->add_option("--auth-token-file", serve.auth_token_file,
                "Require the bearer token on this file's first line (not visible in ps)");
  s->add_option("--allowed-hosts", serve.allowed_hosts,
                "Host names clients may use to reach this server, besides IP addresses and localhost "
                "(e.g. delayq.internal); * allows any. Other names are 403: a guard against DNS rebinding")
      ->delimiter(',');
  s->add_option("--tls-cert", serve.tls_cert, "Serve HTTPS with this PEM certificate chain (with --tls-key)");
  s->add_option("--tls-key", serve.tls_key, "The PEM private key of --tls-cert");
  s->add_flag("--insecure-no-auth", serve.insecure_no_auth,
              "Allow --listen beyond loopback without a token (anyone who reaches the port can use the API)");
  s->add_option("--threads", serve.threads, "Server threads")->capture_default_str();
  s->add_option("--max-body", serve.max_body_bytes, "Largest request body, bytes (larger: 413)")
      ->capture_default_str();
  s->add_option("--max-body-memory", serve.max_body_memory,
                "Bytes of request bodies held at once across all connections (more: 503, body not read)")
      ->capture_default_str();
  s->add_option("--max-connections", serve.max_connections, "Open connections at most")->capture_default_str();
  s->add_option("--max-connections-per-address", serve.max_connections_per_address,
                "Open connections from one client address at most (more: 429); 0 for no cap. Raise it "
                "behind a proxy")
      ->capture_default_str();
  s->add_option("--header-timeout", serve.header_timeout_s,
                "Seconds a request's header may take once its first byte arrived (its body: this plus 1 s "
                "per 64 KiB); slower clients are closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  s->add_option("--max-waiting", serve.max_waiting, "Waiting reserves at most")->capture_default_str();
  s->add_option("--max-queues", serve.max_queues,
                "Queues at most; an enqueue, config, pause or resume creating one more is 429 (reads and "
                "reserves never create a queue)")
      ->capture_default_str();
  s->add_option("--port-file", serve.port_file, "Write the bound port to this file");
  s->add_option("--redis-shards", serve.redis_shards, "With a Redis store: shards of each new queue (1..256)")
      ->capture_default_str();
  s->add_option("--redis-wait-replicas", serve.redis_wait_replicas,
                "With a Redis store: every write a client is answered ok for (enqueue, reserve, ack, nack, "
                "touch, cancel, reschedule, replay, purge) first reaches this many replicas (Redis WAIT), so a "
                "failover cannot lose it")
      ->capture_default_str()
      ->check(CLI::Range(0, 16));
  s->add_option("--redis-wait-timeout-ms", serve.redis_wait_timeout_ms,
                "With --redis-wait-replicas: how long a write waits for its replicas before it answers 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 60'000));
  s->callback([&] {
    if (!ParseDurability(durability, &serve.durability)) {
      throw CLI::ValidationError("--durability", "must be sync, interval or none, not " + durability);
    }
    rc = server::Serve(serve);
  });

  // enqueue ----------------------------------------------------------------------------------
  struct {
    std::string queue, payload, delay, at, key, file;
    std::vector<std::string> headers;
    bool replace = false, base64 = false;
    int32_t max_attempts = 0;
  } enq;
  auto* e = app.add_subcommand("enqueue", "Add a job: delayq enqueue orders '{\"id\":42}' --delay 30m");
  e->add_option("queue", enq.queue, "Queue name")->required();
  e->add_option("payload", enq.payload,
                "The payload: JSON is sent as is, other text as a JSON string, - reads stdin");
  e->add_option("--delay", enq.delay, "Deliver after this long: 250ms, 90s, 30m, 1h30m, 7d");
  e->add_option("--at", enq.at, "Deliver at this time: 2026-12-01T10:00:00Z or epoch ms");
  e->add_option("--key", enq.key, "Idempotency key: a live job with this key is not added twice");
  e->add_flag("--replace", enq.replace, "With --key: replace the live job's payload and due time");
  e->add_option("-H,--header", enq.headers, "Header name=value (repeatable)");
  e->add_option("--max-attempts", enq.max_attempts, "Deliveries before the job goes dead");
  e->add_option("--file", enq.file, "Read the payload from this file");
  e->add_flag("--binary", enq.base64, "Send the payload as opaque bytes (payload_base64)");
  e->callback(run([&]() -> Status {
    EnqueueRequest r;
    if (!enq.delay.empty() && !enq.at.empty()) {
      return Status::InvalidArgument("give --delay or --at, not both");
    }
    if (!enq.delay.empty()) r.when.delay_ms = Duration("--delay", enq.delay);
    if (!enq.at.empty()) r.when.deliver_at_ms = Timestamp("--at", enq.at);
    if (!enq.file.empty()) {
      std::ifstream in(enq.file, std::ios::binary);
      if (!in) return Status::InvalidArgument("cannot read --file " + enq.file);
      SetPayload(r, ReadAll(in), true, enq.base64);
    } else if (enq.payload == "-") {
      SetPayload(r, ReadAll(std::cin), true, enq.base64);
    } else if (!enq.payload.empty()) {
      SetPayload(r, enq.payload, false, enq.base64);
    } else {
      return Status::InvalidArgument("give a payload (JSON or text), - for stdin, or --file FILE");
    }
    for (const auto& h : enq.headers) {
      auto eq = h.find('=');
      if (eq == std::string::npos || eq == 0) {
        return Status::InvalidArgument("--header \"" + h + "\" must be name=value");
      }
      r.headers[h.substr(0, eq)] = h.substr(eq + 1);
    }
    r.key = enq.key;
    r.replace = enq.replace;
    if (enq.max_attempts) r.max_attempts = enq.max_attempts;
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto res = (*client)->Enqueue(enq.queue, r);
    if (!res.ok()) return res.status();
    if (g.json) {
      http::JsonWriter w;
      w.BeginObject().Key("id").String(res->id).Key("due_at").Int(res->due_at_ms);
      w.Key("duplicate").Bool(res->duplicate).EndObject();
      std::printf("%s\n", w.str().c_str());
    } else if (res->duplicate) {
      std::printf("%s %s (the key names this live job), due %s\n",
                  res->replaced ? "replaced" : "duplicate of", res->id.c_str(),
                  WhenText(res->due_at_ms).c_str());
    } else {
      std::printf("enqueued %s due %s\n", res->id.c_str(), WhenText(res->due_at_ms).c_str());
    }
    return Status::Ok();
  }));

  // get / cancel / reschedule ----------------------------------------------------------------
  JobArgs get_args, cancel_args, resched_args;
  auto* gt = app.add_subcommand("get", "Show a job: delayq get orders 01J... (or --key K)");
  get_args.Add(gt);
  gt->callback(run([&]() -> Status {
    auto ref = get_args.Ref();
    if (!ref.ok()) return ref.status();
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto job = (*client)->Get(get_args.queue, *ref);
    if (!job.ok()) return job.status();
    PrintJob(*job, g.json);
    return Status::Ok();
  }));
  auto* cn = app.add_subcommand("cancel", "Delete a scheduled, ready or dead job");
  cancel_args.Add(cn);
  cn->callback(run([&]() -> Status {
    auto ref = cancel_args.Ref();
    if (!ref.ok()) return ref.status();
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    DELAYQ_RETURN_IF_ERROR((*client)->Cancel(cancel_args.queue, *ref));
    if (g.json) {
      std::printf("{\"cancelled\":true}\n");
    } else {
      std::printf("cancelled %s\n", cancel_args.id.empty() ? ("key " + cancel_args.key).c_str()
                                                            : cancel_args.id.c_str());
    }
    return Status::Ok();
  }));
  std::string resched_delay, resched_at;
  auto* rs = app.add_subcommand("reschedule", "Give a scheduled or ready job a new due time");
  resched_args.Add(rs);
  rs->add_option("--delay", resched_delay, "Due after this long from now");
  rs->add_option("--at", resched_at, "Due at this time");
  rs->callback(run([&]() -> Status {
    auto ref = resched_args.Ref();
    if (!ref.ok()) return ref.status();
    When when;
    if (resched_delay.empty() == resched_at.empty()) {
      return Status::InvalidArgument("give --delay or --at (one of them)");
    }
    if (!resched_delay.empty()) when.delay_ms = Duration("--delay", resched_delay);
    if (!resched_at.empty()) when.deliver_at_ms = Timestamp("--at", resched_at);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto job = (*client)->Reschedule(resched_args.queue, *ref, when);
    if (!job.ok()) return job.status();
    PrintJob(*job, g.json);
    return Status::Ok();
  }));

  // stats / pause / resume / config ----------------------------------------------------------
  std::string stats_queue;
  auto* st = app.add_subcommand("stats", "Queue counts, counters and lateness (all queues without a name)");
  st->add_option("queue", stats_queue, "Queue name");
  st->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    std::vector<QueueStats> list;
    if (stats_queue.empty()) {
      auto all = (*client)->ListQueues();
      if (!all.ok()) return all.status();
      list = std::move(*all);
    } else {
      auto one = (*client)->Stats(stats_queue);
      if (!one.ok()) return one.status();
      list.push_back(std::move(*one));
    }
    PrintStats(list, g.json, !stats_queue.empty());
    return Status::Ok();
  }));
  std::string pause_queue, resume_queue;
  auto* pa = app.add_subcommand("pause", "Stop handing out jobs of a queue (they still come due)");
  pa->add_option("queue", pause_queue, "Queue name")->required();
  pa->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    DELAYQ_RETURN_IF_ERROR((*client)->Pause(pause_queue));
    std::printf(g.json ? "{\"paused\":true}\n" : "paused %s\n", pause_queue.c_str());
    return Status::Ok();
  }));
  auto* re = app.add_subcommand("resume", "Hand out jobs of a paused queue again");
  re->add_option("queue", resume_queue, "Queue name")->required();
  re->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    DELAYQ_RETURN_IF_ERROR((*client)->Resume(resume_queue));
    std::printf(g.json ? "{\"paused\":false}\n" : "resumed %s\n", resume_queue.c_str());
    return Status::Ok();
  }));
  std::string delete_queue;
  bool delete_force = false;
  auto* dq = app.add_subcommand("delete-queue", "Delete a queue and its config (it must hold no job unless --force)");
  dq->add_option("queue", delete_queue, "Queue name")->required();
  dq->add_flag("--force", delete_force, "Delete its jobs too: scheduled, ready, reserved and dead");
  dq->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto deleted = (*client)->DeleteQueue(delete_queue, delete_force);
    if (!deleted.ok()) return deleted.status();
    if (g.json) {
      std::printf("{\"deleted\":true,\"jobs\":%lld}\n", static_cast<long long>(*deleted));
    } else {
      std::printf("deleted queue %s (%lld jobs)\n", delete_queue.c_str(), static_cast<long long>(*deleted));
    }
    return Status::Ok();
  }));
  struct {
    std::string queue, lease, backoff_base, backoff_max, dead_retention, max_delay;
    std::optional<int32_t> max_attempts;
    std::optional<double> factor, jitter;
    std::optional<int64_t> max_payload;
  } cfg;
  auto* cf = app.add_subcommand("config", "Show a queue's config, or change it with the options");
  cf->add_option("queue", cfg.queue, "Queue name")->required();
  cf->add_option("--max-attempts", cfg.max_attempts, "Deliveries before a job goes dead");
  cf->add_option("--lease", cfg.lease, "Default lease of a reserve, e.g. 30s");
  cf->add_option("--backoff-base", cfg.backoff_base, "First retry delay, e.g. 1s");
  cf->add_option("--backoff-factor", cfg.factor, "Growth per attempt, e.g. 2");
  cf->add_option("--backoff-max", cfg.backoff_max, "Longest retry delay, e.g. 1h");
  cf->add_option("--jitter", cfg.jitter, "Random spread of retry delays, 0..1");
  cf->add_option("--max-payload", cfg.max_payload, "Largest payload in bytes");
  cf->add_option("--dead-retention", cfg.dead_retention, "Keep dead jobs this long, e.g. 7d");
  cf->add_option("--max-delay", cfg.max_delay, "Longest delay accepted, e.g. 365d");
  cf->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto c = (*client)->GetConfig(cfg.queue);
    if (!c.ok()) return c.status();
    bool change = false;
    auto set_ms = [&](const std::string& text, const char* opt, int64_t* field) {
      if (text.empty()) return;
      *field = Duration(opt, text);
      change = true;
    };
    set_ms(cfg.lease, "--lease", &c->lease_ms);
    set_ms(cfg.backoff_base, "--backoff-base", &c->backoff.base_ms);
    set_ms(cfg.backoff_max, "--backoff-max", &c->backoff.max_ms);
    set_ms(cfg.dead_retention, "--dead-retention", &c->dead_retention_ms);
    set_ms(cfg.max_delay, "--max-delay", &c->max_delay_ms);
    if (cfg.max_attempts) c->max_attempts = *cfg.max_attempts, change = true;
    if (cfg.factor) c->backoff.factor = *cfg.factor, change = true;
    if (cfg.jitter) c->backoff.jitter = *cfg.jitter, change = true;
    if (cfg.max_payload) c->max_payload = *cfg.max_payload, change = true;
    if (change) DELAYQ_RETURN_IF_ERROR((*client)->SetConfig(cfg.queue, *c));
    PrintConfig(cfg.queue, *c, g.json);
    return Status::Ok();
  }));

  // reserve / ack / nack / touch -------------------------------------------------------------
  struct {
    std::string queue, wait = "0s", lease;
    int32_t max = 1;
  } rsv;
  auto* rv = app.add_subcommand("reserve", "Take ready jobs (prints their receipts)");
  rv->add_option("queue", rsv.queue, "Queue name")->required();
  rv->add_option("--max", rsv.max, "Jobs at most")->capture_default_str();
  rv->add_option("--wait", rsv.wait, "Wait this long for a job, e.g. 20s")->capture_default_str();
  rv->add_option("--lease", rsv.lease, "Lease, e.g. 30s (default: the queue's)");
  rv->callback(run([&]() -> Status {
    ReserveRequest r;
    r.max = rsv.max;
    r.wait_ms = Duration("--wait", rsv.wait);
    if (!rsv.lease.empty()) r.lease_ms = Duration("--lease", rsv.lease);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto jobs = (*client)->Reserve(rsv.queue, r);
    if (!jobs.ok()) return jobs.status();
    PrintDeliveries(*jobs, g.json);
    return Status::Ok();
  }));
  struct {
    std::string queue, retry, error, lease;
    std::vector<std::string> receipts;
    bool dead = false;
  } rc_args;
  auto* ak = app.add_subcommand("ack", "Acknowledge deliveries by receipt");
  ak->add_option("queue", rc_args.queue, "Queue name")->required();
  ak->add_option("receipts", rc_args.receipts, "Receipts")->required();
  ak->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto results = (*client)->AckBatch(rc_args.queue, rc_args.receipts);
    Status first;
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].ok()) continue;
      std::fprintf(stderr, "delayq: %s: %s\n", rc_args.receipts[i].c_str(), results[i].message().c_str());
      if (first.ok()) first = results[i];
    }
    if (!first.ok()) return Status(first.code(), "not every receipt was acked");
    std::printf(g.json ? "{\"acked\":%zu}\n" : "acked %zu\n", results.size());
    return Status::Ok();
  }));
  auto* nk = app.add_subcommand("nack", "Give a delivery back: retried after back-off, or dead");
  nk->add_option("queue", rc_args.queue, "Queue name")->required();
  nk->add_option("receipts", rc_args.receipts, "Receipt")->required()->expected(1);
  nk->add_option("--retry", rc_args.retry, "Retry after this long instead of the back-off");
  nk->add_option("--error", rc_args.error, "Why it failed (kept as last_error)");
  nk->add_flag("--dead", rc_args.dead, "Send it to the dead-letter queue now");
  nk->callback(run([&]() -> Status {
    NackRequest r;
    r.receipt = rc_args.receipts.at(0);
    if (!rc_args.retry.empty()) r.retry_in_ms = Duration("--retry", rc_args.retry);
    r.error = rc_args.error;
    r.dead = rc_args.dead;
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto n = (*client)->Nack(rc_args.queue, r);
    if (!n.ok()) return n.status();
    if (g.json) {
      std::printf("{\"state\":\"%s\",\"due_at\":%lld}\n", JobStateName(n->state),
                  static_cast<long long>(n->due_at_ms));
    } else if (n->state == JobState::kDead) {
      std::printf("dead\n");
    } else {
      std::printf("retry due %s\n", WhenText(n->due_at_ms).c_str());
    }
    return Status::Ok();
  }));
  auto* tc = app.add_subcommand("touch", "Extend the lease of a delivery");
  tc->add_option("queue", rc_args.queue, "Queue name")->required();
  tc->add_option("receipts", rc_args.receipts, "Receipt")->required()->expected(1);
  tc->add_option("--lease", rc_args.lease, "New lease from now (default: the queue's)");
  tc->callback(run([&]() -> Status {
    std::optional<int64_t> lease;
    if (!rc_args.lease.empty()) lease = Duration("--lease", rc_args.lease);
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto t = (*client)->Touch(rc_args.queue, rc_args.receipts.at(0), lease);
    if (!t.ok()) return t.status();
    std::printf(g.json ? "{\"lease_deadline\":%lld}\n" : "lease until %lld\n",
                static_cast<long long>(t->lease_deadline_ms));
    return Status::Ok();
  }));

  // dead list / replay / purge ---------------------------------------------------------------
  auto* dead = app.add_subcommand("dead", "The dead-letter queue: list, replay, purge");
  dead->require_subcommand(1);
  struct {
    std::string queue;
    int32_t limit = 100;
    std::vector<std::string> ids;
    bool yes = false;
  } dl;
  auto* dls = dead->add_subcommand("list", "Dead jobs, oldest first");
  dls->add_option("queue", dl.queue, "Queue name")->required();
  dls->add_option("--limit", dl.limit, "At most this many")->capture_default_str();
  dls->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto jobs = (*client)->ListDead(dl.queue, dl.limit);
    if (!jobs.ok()) return jobs.status();
    PrintDeadJobs(*jobs, g.json);
    return Status::Ok();
  }));
  auto* drp = dead->add_subcommand("replay", "Make dead jobs ready again (all, or the ids given)");
  drp->add_option("queue", dl.queue, "Queue name")->required();
  drp->add_option("ids", dl.ids, "Job ids (none: all)");
  drp->callback(run([&]() -> Status {
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto n = (*client)->ReplayDead(dl.queue, dl.ids);
    if (!n.ok()) return n.status();
    std::printf(g.json ? "{\"replayed\":%lld}\n" : "replayed %lld\n", static_cast<long long>(*n));
    return Status::Ok();
  }));
  auto* dpg = dead->add_subcommand("purge", "Delete every dead job of a queue");
  dpg->add_option("queue", dl.queue, "Queue name")->required();
  dpg->add_flag("--yes", dl.yes, "Do not ask");
  dpg->callback(run([&]() -> Status {
    if (!dl.yes) {
      if (!isatty(STDIN_FILENO)) {
        return Status::InvalidArgument("purge deletes dead jobs for good; add --yes to confirm");
      }
      std::fprintf(stderr, "delete every dead job of %s? [y/N] ", dl.queue.c_str());
      std::string answer;
      std::getline(std::cin, answer);
      if (answer != "y" && answer != "Y" && answer != "yes") {
        std::fprintf(stderr, "nothing deleted\n");
        return Status::Ok();
      }
    }
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto n = (*client)->PurgeDead(dl.queue);
    if (!n.ok()) return n.status();
    std::printf(g.json ? "{\"purged\":%lld}\n" : "purged %lld\n", static_cast<long long>(*n));
    return Status::Ok();
  }));

  // doctor -------------------------------------------------------------------------------------
  std::string doctor_url;
  auto* dr = app.add_subcommand("doctor", "Check a Redis for settings that lose or delay jobs");
  dr->add_option("url", doctor_url, "redis://HOST:PORT or redis-cluster://HOST:PORT,...")->required();
  dr->callback([&] {
    auto findings = redis::Doctor(doctor_url);
    if (!findings.ok()) {
      rc = Fail(findings.status());
      return;
    }
    if (g.json) {
      http::JsonWriter w;
      w.BeginObject().Key("problems").BeginArray();
      for (const auto& f : *findings) {
        w.BeginObject().Key("node").String(f.node).Key("problem").String(f.problem).Key("fix").String(f.fix).EndObject();
      }
      w.EndArray().EndObject();
      std::printf("%s\n", w.str().c_str());
    } else if (findings->empty()) {
      std::printf("%s: no setting found that can lose or delay jobs\n", doctor_url.c_str());
    } else {
      for (const auto& f : *findings) {
        std::printf("PROBLEM  %s: %s\n    fix: %s\n", f.node.c_str(), f.problem.c_str(), f.fix.c_str());
      }
      std::printf("%zu problem%s found\n", findings->size(), findings->size() == 1 ? "" : "s");
    }
    rc = findings->empty() ? 0 : kExitFailure;
  });

  AddWorkCommand(app, g, rc);
  AddBenchCommand(app, g, rc);
  AddForwardCommand(app, rc);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }
  return rc;
}

}  // namespace delayq::cli
