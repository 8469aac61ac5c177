// The invariants delayq-check verifies over a history and the final state it read back.
//
//   early        no job is delivered before its due time (both on the store's clock: a
//                delivery's time is its lease deadline minus the lease it asked for)
//   due          a delivery's due time is one that an answer gave the job
//   attempts     attempt <= max_attempts; a nack of the last attempt makes the job dead
//   lease        a job has at most one live lease: a delivery begins after the last one's lease
//                (as touched) ran out, unless that one was nacked
//   stale        a receipt acts only while its delivery is the job's newest: no ack, nack or
//                touch succeeds after the client saw a later delivery; a forged one never does
//   lost         every acknowledged enqueue ends acked, cancelled, dead, purged or present
//   resurrected  nothing is delivered or present after an ack or cancel answered ok, but a job
//                an ack kept completed (keep_completed_ms), while no cancel of it answered ok
//   result       a completed job shows the result of an ack of it that answered ok (or in doubt)
//   wait         a wait for an outcome answers a state that is not final only once its wait_ms
//                passed; completed only with the result of an ack of the job sent before the
//                answer; cancelled only after a cancel of it was sent
//   payload      a delivery carries the payload of an enqueue of its job (the one that made it,
//                or a replace by its key), not another job's nor one cut short
//   pause        a reserve sent after a pause of its queue answered ok, and answered before the
//                next resume was sent, delivers nothing
//   keys         no two live jobs share a key
//   answered     every request is answered; a long poll within wait_ms + 1 s, anything else
//                within 5 s; no internal errors, no 503 outside a fault. The workers stop
//                waiting after 5 s (a reserve: its wait_ms more) and record "no_answer", so a
//                server that drops an answer fails the run instead of hanging it
//   must_fail    a request that must fail does
//   counts       stats and /metrics equal a recount of the final state
//   lateness     p99 lateness of jobs that a waiting poll could take at once stays under 1 s
//   schedule     a recurring schedule changed in every way while it runs (put, replace, pause,
//                resume, delete, its queue's max_delay_ms): each run is due at its occurrence
//                (or later, when it was made late) and delivered at or after it, once as a
//                first delivery, and none comes due
//                after a delete or pause answered, before the next put or resume
//
// Faults open windows in which slow answers and 503s are expected; a mode that loses data by
// design (a Redis that fsyncs every second, power loss without sync) reports what it lost
// instead of failing on it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "check/history.h"

namespace delayq::check {

struct FinalJob {
  bool found = false;
  std::string state;  // scheduled | ready | reserved | dead | completed
  std::string key;
  int32_t attempt = 0;
  std::string result;  // when completed
};

struct QueueCounts {
  int64_t scheduled = 0, ready = 0, reserved = 0, dead = 0, completed = 0;
  bool operator==(const QueueCounts&) const = default;
};

struct FinalState {
  std::map<std::string, FinalJob> jobs;        // by id: a Get of every id the history names
  std::map<std::string, QueueCounts> stats;    // GET /v1/queues/{q}
  std::map<std::string, QueueCounts> metrics;  // delayq_jobs{queue,state} from /metrics
  bool settled = true;                         // every job due and every lease over when it was read
};

struct VerifyOptions {
  bool loss_expected = false;          // report lost/resurrected jobs instead of failing on them
  bool clock_steps = false;            // the server's wall clock steps: skip wall-clock checks
  int64_t fault_grace_us = 3'000'000;  // after a fault ends, errors are still expected this long
  std::vector<int> killed_clients;     // workers killed with SIGKILL (their last op is in doubt)
  // The store answers a reserve before its lease is on disk (the embedded store, in every mode:
  // a lost lease only hands the job out again), so a power cut may lose the leases answered
  // just before it: a job handed out again across a power cut is counted, not an anomaly.
  bool unsynced_leases = false;
};

struct Anomaly {
  std::string kind;                // one of the invariant names above
  std::string what;                // one sentence
  std::vector<std::string> slice;  // the smallest slice of history that shows it
};

struct Report {
  int64_t ops = 0, answered = 0, in_doubt = 0, errors = 0, faults = 0;
  int64_t jobs = 0, deliveries = 0;
  int64_t lost = 0, resurrected = 0;
  double lost_window_ms = 0;  // the oldest lost job was acknowledged this long before its fault
  double lateness_p50_ms = 0, lateness_p99_ms = 0, lateness_max_ms = 0;
  int64_t lateness_samples = 0;
  std::vector<Anomaly> anomalies;
  std::map<std::string, int64_t> by_op;  // operations per kind
  // In a mode that loses writes by design: what the lost writes caused, by invariant
  // (lost, resurrected, lease, stale, due, attempts), instead of anomalies.
  std::map<std::string, int64_t> loss_effects;
};

Report Verify(const History& history, const FinalState& final_state, const VerifyOptions& options);

}  // namespace delayq::check
