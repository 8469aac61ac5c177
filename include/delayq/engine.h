// The embedded store: delayq in-process on a RocksDB directory.
//
//   auto engine = delayq::Engine::Open({.path = "./delayq-data"});
//   if (!engine.ok()) { ... engine.status().message() ... }
//   (*engine)->Enqueue("orders", {.payload = "...", .when = {.delay_ms = 30 * 60'000}});
//
// Jobs live on disk; memory holds the ready and reserved jobs of each queue and a bounded
// window of the soon-due scheduled ones. A scheduler thread sleeps until the next due time or
// lease deadline and is woken early by anything that makes an earlier one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "delayq/clock.h"
#include "delayq/queue.h"

namespace delayq {

enum class Durability {
  kSync,      // every write that returns success was fsynced first; concurrent callers share
              // fsyncs (group commit). Survives kill -9 and power loss.
  kInterval,  // writes reach the OS at once and are fsynced at most every sync_interval_ms.
              // Survives kill -9; a power loss can lose the last interval.
  kNone,      // writes reach the OS, never fsynced by delayq. Survives kill -9 only.
};
// "sync" | "interval" | "none"
const char* DurabilityName(Durability d);
bool ParseDurability(std::string_view text, Durability* out);

struct EngineOptions {
  std::string path;                           // required: the data directory (created if missing)
  Durability durability = Durability::kSync;  // default sync
  int64_t sync_interval_ms = 50;              // kInterval: the longest time between fsyncs
  std::shared_ptr<Clock> clock;               // default: SystemClock
  QueueConfig default_queue_config;           // for queues without a stored config
  // Scheduled jobs kept in memory across all queues (the rest stay on disk). Default 1 M.
  size_t window_capacity = 1 << 20;
  // Scheduled jobs read from disk at a time when a queue's window runs empty. Default 4096.
  size_t window_refill = 4096;
  size_t block_cache_bytes = 64 << 20;    // RocksDB block cache; default 64 MiB
  size_t write_buffer_bytes = 128 << 20;  // RocksDB memtables, all column families; 128 MiB
  // Queues at most: creating one more (an enqueue, config, pause or resume naming a new queue)
  // is kResourceExhausted. Reads and reserves never create a queue. Default 10 000.
  size_t max_queues = 10'000;
  ScheduleRunnerOptions schedules;  // recurring schedules (delayq/schedule.h)
};

// Internal sizes, for tests and the bounded-memory benchmark.
struct EngineInfo {
  size_t window_entries = 0;  // scheduled jobs held in memory
  size_t ready_entries = 0;
  size_t leases = 0;
  size_t waiters = 0;
  size_t queues = 0;
  uint64_t writes = 0;  // store writes since open
  uint64_t syncs = 0;   // log fsyncs since open (writes / syncs = callers per group commit)
  // Operations on the engine's one lock since open: how many took it, how many found it taken,
  // and the time they spent waiting for it and holding it (µs, wall clock).
  uint64_t lock_acquisitions = 0;
  uint64_t lock_contended = 0;
  uint64_t lock_wait_us = 0;
  uint64_t lock_held_us = 0;
};

class Engine : public Queue {
 public:
  // Opens (or creates) the store at options.path and recovers it: counts every job, loads the
  // ready and reserved ones and the soon-due window. Reserved jobs keep their lease deadline
  // and receipts; when the lease ran out while delayq was down they are redelivered at once.
  // Errors: kInvalidArgument (bad options), kIoError (the directory cannot be opened, e.g. it
  // is locked by another delayq), kCorruption (a record could not be decoded).
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& options);

  // Answers every waiting reserve (with no jobs), stops the scheduler and syncs the log. Later
  // calls answer kUnavailable. Idempotent; the destructor calls it.
  virtual void Close() = 0;

  // True once Open finished recovery (always, for an Engine you hold).
  virtual bool Ready() const = 0;

  virtual EngineInfo Info() = 0;
};

}  // namespace delayq
