// One queue of the embedded engine in memory (engine_impl.h says how data flows):
//   window  scheduled jobs with due bucket <= window_end, about a bounded number in all queues;
//           the rest of the scheduled jobs stay on disk and are read back in order (Refill)
//           when a queue's window runs empty. Invariant: an empty window means none are left.
//   ready   jobs that came due and are not reserved (ready_jobs.h).
//   leases  its leased jobs, counted (the leases themselves are in the engine's LeaseTable).
//   due_histogram  its scheduled jobs per minute of due time.
//   flow    its flow control (flow_state.h).
//   waiting its line of waiting reserves (waiters.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/histogram.h"
#include "store/embedded/due_histogram.h"
#include "store/embedded/due_window.h"
#include "store/embedded/flow_state.h"
#include "store/embedded/lease_counts.h"
#include "store/embedded/ready_jobs.h"
#include "store/embedded/waiters.h"

namespace delayq {

struct QueueState {
  explicit QueueState(std::string n) : name(std::move(n)) {}
  std::string name;
  QueueMeta meta;  // config (when has_config) and paused
  const QueueConfig& ConfigOr(const QueueConfig& defaults) const { return meta.has_config ? meta.config : defaults; }

  DueWindow window;                // scheduled, due bucket <= window_end -> attempt
  int64_t window_end = kNoBucket;  // last due bucket held whole in the window
  bool window_complete = true;     // no scheduled job beyond the window (window_end = kNoBucket)
  ReadyJobs ready;
  LeaseCounts leases;
  DueHistogram due_histogram;

  int64_t live = 0;  // entries in the due index: scheduled + ready + reserved
  int64_t dead = 0;
  // No dead job of the queue died before dead_floor_ms (Clock::kNever: it holds none).
  int64_t dead_floor_ms = Clock::kNever;
  int64_t completed = 0;  // kept completed jobs (engine_completed.cc)
  // No completed job of the queue was acked before completed_floor_ms (Clock::kNever: none).
  int64_t completed_floor_ms = Clock::kNever;
  QueueCounters counters;
  LatencyHistogram lateness;
  FlowState flow;
  WaiterLine waiting;
  // Made only to hold waiting reserves for a name that is not a queue: invisible to reads and
  // lists, dropped when its last waiter leaves, made a queue by the first write to it.
  bool provisional = false;
};

}  // namespace delayq
