// delayq-check: drives a delayq store with concurrent, mixed and faulty traffic, records the
// history of every request, and verifies the invariants of verify.h over it.
//
//   delayq-check --store embedded --durability sync --fault kill-server --duration 30s
//
// Prints a one-line verdict (and, on a failure, each anomaly with the slice of history that
// shows it); exits 0 when every invariant held. docs/reliability.md explains the modes.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <climits>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "check/run.h"
#include "check/worker.h"
#include "core/duration.h"

namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string SelfPath(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) return std::string(buf, static_cast<size_t>(n));
  return argv0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace delayq::check;
  CLI::App app{"delayq-check: a history checker for delayq (see docs/reliability.md)"};
  RunOptions o;
  o.delayq_bin = DELAYQ_BIN;
  o.fuse_bin = DELAYQ_FUSE_BIN;
  o.self_bin = SelfPath(argv[0]);
  std::string duration = "20s", every = "5s", max_duration = "0s";
  app.add_option("--store", o.store, "embedded | redis | redis-cluster | postgres")->capture_default_str();
  app.add_option("--durability", o.durability, "embedded store: sync | interval | none")->capture_default_str();
  app.add_option("--fault", o.fault,
                 "none | kill-server | kill-consumers | stop-server | redis-restart | redis-failover | pg-restart | "
                 "pg-terminate | pg-failover | "
                 "clock-step | disk-full | disk-error | power-cut")
      ->capture_default_str();
  app.add_option("--clients", o.clients, "worker processes (one administers)")->capture_default_str();
  app.add_option("--servers", o.servers, "delayq servers sharing the store (Redis and PostgreSQL)")
      ->capture_default_str();
  app.add_option("--duration", duration,
                 "the least time the traffic runs; it goes on until --min-deliveries and --min-faults were seen")
      ->capture_default_str();
  app.add_option("--min-deliveries", o.min_deliveries, "deliveries a run needs to judge")->capture_default_str();
  app.add_option("--min-faults", o.min_faults, "faults a run needs to judge (none for --fault none)")
      ->capture_default_str();
  app.add_option("--max-duration", max_duration,
                 "the run ends here whatever it has seen, and fails if that is too little (0s: 4 x --duration, "
                 "at least --duration + 90s)")
      ->capture_default_str();
  app.add_option("--fault-every", every, "time between faults")->capture_default_str();
  app.add_option("--redis-appendfsync", o.redis_appendfsync, "always | everysec")->capture_default_str();
  app.add_option("--redis-wait-replicas", o.redis_wait_replicas, "delayq serve --redis-wait-replicas")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  app.add_option("--delayq", o.delayq_bin, "the delayq binary")->capture_default_str();
  app.add_option("--keep", o.keep, "keep the history and logs in this directory");
  app.add_option("--json", o.json, "append the result to this file as a JSON line");

  WorkerOptions w;
  bool worker = false;
  std::string urls, queues;
  auto* wg = app.add_option_group("worker", "(internal) run as a worker");
  wg->add_flag("--worker", worker);
  wg->add_option("--id", w.id);
  wg->add_option("--urls", urls);
  wg->add_option("--queues", queues);
  wg->add_option("--history", w.history);
  wg->add_option("--until-us", w.until_us);
  wg->add_flag("--admin", w.admin);
  CLI11_PARSE(app, argc, argv);

  if (worker) {
    w.seed = o.seed;
    w.urls = Split(urls);
    w.queues = Split(queues);
    try {
      return RunWorker(w);
    } catch (const std::exception& e) {
      std::cerr << "worker " << w.id << ": " << e.what() << "\n";
      return 1;
    }
  }
  auto d = delayq::ParseDuration(duration);
  auto e = delayq::ParseDuration(every);
  auto cap = delayq::ParseDuration(max_duration);
  if (!d.ok() || !e.ok() || !cap.ok()) {
    std::cerr << "--duration, --max-duration and --fault-every take durations such as 30s or 2m\n";
    return 2;
  }
  o.duration_ms = *d;
  o.max_duration_ms = *cap;
  o.fault_every_ms = *e;
  if (o.clients < 2) {
    std::cerr << "--clients must be at least 2 (one of them administers)\n";
    return 2;
  }
  try {
    RunResult r = RunCheck(o);
    for (const Anomaly& a : r.report.anomalies) {
      static int shown = 0;
      if (++shown > 10) break;
      std::cout << "anomaly [" << a.kind << "] " << a.what << "\n";
      for (const auto& line : a.slice) std::cout << line << "\n";
    }
    std::cout << r.verdict << std::endl;
    if (!o.json.empty()) {
      const Report& rep = r.report;
      nlohmann::json j = {{"mode", r.mode},
                          {"store", o.store},
                          {"durability", o.durability},
                          {"fault", o.fault},
                          {"pass", r.pass},
                          {"ops", rep.ops},
                          {"in_doubt", rep.in_doubt},
                          {"jobs", rep.jobs},
                          {"acknowledged", r.acknowledged},
                          {"deliveries", rep.deliveries},
                          {"faults", r.faults_injected},
                          {"anomalies", rep.anomalies.size()},
                          {"lost", rep.lost},
                          {"resurrected", rep.resurrected},
                          {"lateness_p50_ms", rep.lateness_p50_ms},
                          {"lateness_p99_ms", rep.lateness_p99_ms},
                          {"lateness_max_ms", rep.lateness_max_ms},
                          {"loss_expected", LossExpected(o)},
                          {"loss_effects", rep.loss_effects},
                          {"lost_window_ms", rep.lost_window_ms},
                          {"duration_ms", o.duration_ms},
                          {"traffic_ms", r.traffic_ms},
                          {"enough_traffic", r.enough_traffic},
                          {"clients", o.clients}};
      std::ofstream(o.json, std::ios::app) << j.dump() << "\n";
    }
    return r.pass ? 0 : 1;
  } catch (const std::exception& ex) {
    std::cerr << "delayq-check: " << ex.what() << "\n";
    return 3;
  }
}
