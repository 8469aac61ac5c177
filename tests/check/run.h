// One delayq-check run: starts the store (and Redis), the workers and the faults, stops them,
// lets the store settle, reads the final state back and verifies the history.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "check/verify.h"

namespace delayq::check {

// The faults a run can inject (--fault). Each is injected every fault_every_ms and healed.
//   none              no fault
//   kill-server       SIGKILL a delayq server, restart it on the same data
//   kill-consumers    SIGKILL a worker (a consumer holding jobs), start a new one
//   stop-server       SIGSTOP a delayq server for longer than the longest lease, then SIGCONT
//   redis-restart     SIGKILL Redis, restart it from its AOF (--redis-appendfsync)
//   redis-failover    hold the replica 0.5 s behind, SIGKILL the Redis primary, promote the
//                     replica (REPLICAOF NO ONE), restart delayq on it; the old primary comes
//                     back as the new replica
//   pg-restart        crash PostgreSQL (SIGQUIT: pg_ctl stop -m immediate) and start it again
//   pg-terminate      end every connection delayq has to PostgreSQL (pg_terminate_backend)
//   pg-failover       SIGKILL the PostgreSQL primary, promote its synchronous standby
//                     (synchronous_standby_names), restart delayq on it, take a new standby
//   clock-step        step the server's wall clock an hour forward, then back; later an hour
//                     back, then forward (libfaketime; the monotonic clock is untouched)
//   disk-full         the data directory answers ENOSPC for a while (delayq-fuse)
//   disk-error        the data directory answers EIO for a while (delayq-fuse)
//   power-cut         SIGKILL the server and drop every write not fsynced (delayq-fuse), as a
//                     power loss would; remount and restart
struct RunOptions {
  std::string delayq_bin;           // the `delayq` binary
  std::string self_bin;             // this binary (workers are started from it)
  std::string fuse_bin;             // the `delayq-fuse` binary (disk faults)
  std::string store = "embedded";   // embedded | redis | redis-cluster | postgres
  std::string durability = "sync";  // embedded: sync | interval | none
  std::string fault = "none";
  int clients = 6;  // workers; one of them administers (pause, config, dead)
  int servers = 1;  // delayq servers sharing the store (Redis and PostgreSQL)
  // A run ends on the traffic it has seen, not on a clock: it goes on for at least duration_ms,
  // then until the workers have recorded min_deliveries deliveries and min_faults faults were
  // injected (none for fault "none"), and ends at max_duration_ms whatever it has seen (0: four
  // times duration_ms, and at least duration_ms + 90 s). A run cut off by that cap fails with
  // "too little traffic to judge", naming the figures: a slow or loaded machine takes longer,
  // it does not fail.
  int64_t duration_ms = 20'000;
  int64_t min_deliveries = 100;
  int64_t min_faults = 1;
  int64_t max_duration_ms = 0;
  int64_t fault_every_ms = 5'000;
  std::string redis_appendfsync = "everysec";  // always | everysec
  int redis_wait_replicas = 0;                 // delayq serve --redis-wait-replicas
  uint64_t seed = 1;
  std::string keep;  // keep the history and logs in this directory
  std::string json;  // append the result as one JSON line to this file
};

struct RunResult {
  Report report;
  std::string verdict;  // the one-line verdict
  bool pass = false;
  std::string mode;  // "embedded/sync kill-server"
  int64_t faults_injected = 0;
  int64_t acknowledged = 0;    // enqueues acknowledged
  int64_t traffic_ms = 0;      // how long the workers ran
  bool enough_traffic = true;  // false: the cap ended the run before it had min_deliveries/min_faults
};

RunResult RunCheck(const RunOptions& options);

// Whether a mode loses data by design (so loss is reported, not an anomaly).
bool LossExpected(const RunOptions& options);

}  // namespace delayq::check
