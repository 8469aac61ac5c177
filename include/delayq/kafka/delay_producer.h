// The producer SDK: sends a message to be delivered to `target_topic` after a delay, by writing
// it to the level topic that fits (see levels.h) with the delayq-target / delayq-due headers.
// `delayq forward` does the rest. Idempotent, acks=all.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "delayq/clock.h"
#include "delayq/kafka/levels.h"
#include "delayq/status.h"

namespace delayq::kafka {

struct DelayedMessage {
  std::string target_topic;
  std::optional<std::string> key;  // kept as the key of the delivered message
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;  // delivered unchanged
  // When to deliver: `due_ms` (epoch milliseconds) when set, else now + `delay`.
  std::chrono::milliseconds delay{0};
  std::optional<int64_t> due_ms;
};

struct DelayProducerOptions {
  std::string brokers;  // "host:port,host:port"
  std::string levels = std::string(kDefaultLevels);
  int topics_per_level = 1;
  std::string prefix = std::string(kDefaultPrefix);
  // Extra librdkafka settings ("linger.ms" -> "10"); acks and idempotence cannot be weakened.
  std::map<std::string, std::string> kafka_config;
  std::shared_ptr<Clock> clock;  // default: the system clock
};

// Called once per message from the producer's poll thread: ok once the broker has it.
using DeliveryCallback = std::function<void(const Status&)>;

class DelayProducer {
 public:
  // kInvalidArgument names a bad option; nothing is sent until Send.
  static Result<std::unique_ptr<DelayProducer>> Create(DelayProducerOptions options);
  ~DelayProducer();  // flushes for up to 10 s

  // Queues the message; `on_delivery` (optional) reports the broker's answer. kInvalidArgument
  // for a bad target topic, kResourceExhausted when the local queue is full (retry after Flush).
  Status Send(DelayedMessage message, DeliveryCallback on_delivery = {});
  // Waits until every queued message is confirmed or failed. kUnavailable on timeout.
  Status Flush(std::chrono::milliseconds timeout);
  // The level topic the next message with this delay goes to (topics of a level take turns).
  std::string TopicFor(int64_t delay_ms);

 private:
  class Impl;
  explicit DelayProducer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::kafka
