#include "delayq/kafka/delay_producer.h"

#include <fmt/format.h>
#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <thread>

#include "kafka/kafka_config.h"

namespace delayq::kafka {

class DelayProducer::Impl : public RdKafka::DeliveryReportCb {
 public:
  Impl(Levels levels, std::shared_ptr<Clock> clock) : levels_(std::move(levels)), clock_(std::move(clock)) {}

  ~Impl() override {
    if (producer_) producer_->flush(10'000);
    stop_ = true;
    if (poller_.joinable()) poller_.join();
  }

  Status Start(const DelayProducerOptions& options) {
    Result<std::unique_ptr<RdKafka::Conf>> conf = MakeConf(ProducerSettings(options.brokers, options.kafka_config));
    if (!conf.ok()) return conf.status();
    std::string error;
    (*conf)->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(this), error);
    producer_.reset(RdKafka::Producer::create(conf->get(), error));
    if (!producer_) return Status::InvalidArgument(fmt::format("cannot create a Kafka producer: {}", error));
    poller_ = std::thread([this] {
      while (!stop_) producer_->poll(100);
    });
    return Status::Ok();
  }

  std::string TopicFor(int64_t delay_ms) {
    size_t level = levels_.LevelFor(delay_ms);
    int n = static_cast<int>(next_++ % static_cast<uint64_t>(levels_.topics_per_level()));
    return levels_.TopicName(level, n);
  }

  Status Send(DelayedMessage message, DeliveryCallback on_delivery) {
    int64_t now_ms = clock_->NowMs();
    int64_t due_ms = message.due_ms.value_or(now_ms + message.delay.count());
    std::string due = std::to_string(due_ms);
    Result<Routing> routing = ParseRouting(&message.target_topic, &due);
    if (!routing.ok()) return routing.status();
    std::unique_ptr<RdKafka::Headers> headers(RdKafka::Headers::create());
    for (const auto& [name, value] : message.headers) {
      if (name == kTargetHeader || name == kDueHeader) {
        return Status::InvalidArgument(fmt::format("header {} is set by delayq; leave it out", name));
      }
      headers->add(name, value.data(), value.size());
    }
    headers->add(std::string(kTargetHeader), message.target_topic);
    headers->add(std::string(kDueHeader), due);
    auto* callback = on_delivery ? new DeliveryCallback(std::move(on_delivery)) : nullptr;
    RdKafka::ErrorCode err = producer_->produce(
        TopicFor(std::max<int64_t>(0, due_ms - now_ms)), RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
        message.value.data(), message.value.size(), message.key ? message.key->data() : nullptr,
        message.key ? message.key->size() : 0, 0, headers.get(), callback);
    if (err != RdKafka::ERR_NO_ERROR) {
      delete callback;
      if (err == RdKafka::ERR__QUEUE_FULL) {
        return Status::ResourceExhausted("the producer's local queue is full; Flush and send again");
      }
      return Status::InvalidArgument(fmt::format("cannot send to Kafka: {}", RdKafka::err2str(err)));
    }
    (void)headers.release();  // owned by librdkafka once produce succeeded
    return Status::Ok();
  }

  Status Flush(std::chrono::milliseconds timeout) {
    RdKafka::ErrorCode err = producer_->flush(static_cast<int>(timeout.count()));
    if (err != RdKafka::ERR_NO_ERROR) {
      return Status::Unavailable(fmt::format("{} messages still unconfirmed after {} ms: {}", producer_->outq_len(),
                                             timeout.count(), RdKafka::err2str(err)));
    }
    return Status::Ok();
  }

  void dr_cb(RdKafka::Message& message) override {
    std::unique_ptr<DeliveryCallback> callback(static_cast<DeliveryCallback*>(message.msg_opaque()));
    if (!callback) return;
    if (message.err() == RdKafka::ERR_NO_ERROR) {
      (*callback)(Status::Ok());
    } else {
      (*callback)(Status::Unavailable(
          fmt::format("Kafka did not take the message for {}: {}", message.topic_name(), message.errstr())));
    }
  }

 private:
  Levels levels_;
  std::shared_ptr<Clock> clock_;
  std::unique_ptr<RdKafka::Producer> producer_;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

DelayProducer::DelayProducer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DelayProducer::~DelayProducer() = default;

Result<std::unique_ptr<DelayProducer>> DelayProducer::Create(DelayProducerOptions options) {
  Result<Levels> levels = Levels::Parse(options.levels, options.prefix, options.topics_per_level);
  if (!levels.ok()) return levels.status();
  if (options.brokers.empty()) return Status::InvalidArgument("brokers is empty; give host:port[,host:port]");
  std::shared_ptr<Clock> clock = options.clock ? options.clock : SystemClock::Instance();
  auto impl = std::make_unique<Impl>(*std::move(levels), std::move(clock));
  DELAYQ_RETURN_IF_ERROR(impl->Start(options));
  return std::unique_ptr<DelayProducer>(new DelayProducer(std::move(impl)));
}

Status DelayProducer::Send(DelayedMessage message, DeliveryCallback on_delivery) {
  return impl_->Send(std::move(message), std::move(on_delivery));
}
Status DelayProducer::Flush(std::chrono::milliseconds timeout) { return impl_->Flush(timeout); }
std::string DelayProducer::TopicFor(int64_t delay_ms) { return impl_->TopicFor(delay_ms); }

}  // namespace delayq::kafka
