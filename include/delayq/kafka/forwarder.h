// `delayq forward`: consumes the level topics (levels.h) as one consumer group and produces each
// message to its target topic when it is due — or, when time remains, to the level that fits the
// remaining delay; remainders shorter than the smallest level wait in memory. Never early.
//
// Delivery: at-least-once by default (an offset is committed only once every message before it
// is confirmed by the brokers), or exactly-once (forward and offset commit in one transaction
// per batch). Each partition's messages are held in memory up to a bound, then the partition is
// paused; the consumer keeps polling, so a far-off head neither stalls other partitions nor
// pushes the instance out of its group.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "delayq/clock.h"
#include "delayq/job.h"
#include "delayq/kafka/levels.h"
#include "delayq/status.h"

namespace delayq::kafka {

struct ForwarderOptions {
  std::string brokers;  // "host:port,host:port"
  std::string levels = std::string(kDefaultLevels);
  int topics_per_level = 1;
  std::string prefix = std::string(kDefaultPrefix);
  std::string group = "delayq-forwarder";
  bool exactly_once = false;
  // Exactly-once: this instance's transactional.id; default "<group>-<hostname>-<pid>". Give
  // each instance a stable one so a restarted instance fences its predecessor's transaction.
  std::string transactional_id;
  size_t max_held_per_partition = 20'000;  // read ahead this far, then pause the partition
  size_t max_batch = 10'000;               // messages per transaction (exactly-once)
  std::chrono::milliseconds commit_interval{100};
  std::chrono::milliseconds startup_timeout{10'000};  // to reach the brokers at start
  // Extra librdkafka settings for the consumer / producer (acks, idempotence and offset
  // commits cannot be changed).
  std::map<std::string, std::string> consumer_config;
  std::map<std::string, std::string> producer_config;
  std::shared_ptr<Clock> clock;  // default: the system clock
};

struct ForwarderStats {
  struct Level {
    std::string name;        // "30s"
    uint64_t forwarded = 0;  // produced to the target topic
    uint64_t cascaded = 0;   // produced to a shorter level
    uint64_t dead = 0;       // produced to <prefix>.dead
    uint64_t held = 0;       // read and not yet finished (in memory or in flight)
  };
  struct Partition {
    std::string topic;
    int32_t partition = 0;
    int64_t lag = -1;  // high watermark - committed position; -1 unknown
    bool paused = false;
  };
  std::vector<Level> levels;
  std::vector<Partition> assigned;
  uint64_t transactions = 0, aborted_transactions = 0, produce_errors = 0, rebalances = 0;
  LatenessSummary lateness;  // confirmed time - due time, of forwarded messages
  LatenessSummary batch;     // time to act on one batch (and commit its transaction)
};

class Forwarder {
 public:
  // Validates the options, reaches the brokers and checks that every level topic exists; the
  // error names what is wrong (a level, a missing topic, unreachable brokers).
  static Result<std::unique_ptr<Forwarder>> Create(ForwarderOptions options);
  ~Forwarder();

  // Joins the group and forwards until Stop(); then finishes what is in flight, gives back
  // what is not due, commits and leaves the group. An error only for a fatal Kafka error.
  Status Run();
  // Thread-safe; Run returns soon after.
  void Stop();

  ForwarderStats Stats() const;
  // Prometheus text exposition of Stats().
  std::string RenderMetrics() const;

 private:
  class Impl;
  explicit Forwarder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::kafka
