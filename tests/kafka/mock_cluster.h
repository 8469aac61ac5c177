// librdkafka's built-in mock cluster (real Kafka protocol on loopback ports, in this process),
// and a reader that collects what arrives on a topic. See ../shared/DEPENDENCIES.md for what the
// mock does not emulate (transactional offsets, hiding aborted messages).
#pragma once
// Used by tests/kafka and bench/kafka_bench.cc; no GoogleTest in here.

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace delayq::testing {

// Kafka protocol API keys, for injecting errors into requests of one kind (librdkafka keeps its
// RD_KAFKAP_* names in a header it does not install).
enum KafkaApiKey : int16_t { kApiProduce = 0, kApiAddPartitionsToTxn = 24, kApiEndTxn = 26 };

inline int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class MockCluster {
 public:
  explicit MockCluster(int brokers = 3) {
    char err[256];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);
    handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (handle_ == nullptr) throw std::runtime_error(err);
    cluster_ = rd_kafka_mock_cluster_new(handle_, brokers);
    if (cluster_ == nullptr) throw std::runtime_error("cannot start the mock Kafka cluster");
  }
  ~MockCluster() {
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(handle_);
  }
  MockCluster(const MockCluster&) = delete;

  std::string bootstraps() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }
  rd_kafka_mock_cluster_t* get() { return cluster_; }

  void CreateTopic(const std::string& name, int partitions = 1) {
    if (rd_kafka_mock_topic_create(cluster_, name.c_str(), partitions, 1) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw std::runtime_error("cannot create topic " + name);
    }
  }

 private:
  rd_kafka_t* handle_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

// The offsets `group` has committed on each (topic, partition 0); -1001 when none.
inline std::map<std::string, int64_t> CommittedOffsets(const std::string& brokers, const std::string& group,
                                                       const std::vector<std::string>& topics) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", brokers, err);
  conf->set("group.id", group, err);
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), err));
  std::vector<RdKafka::TopicPartition*> tps;
  for (const auto& t : topics) tps.push_back(RdKafka::TopicPartition::create(t, 0));
  consumer->committed(tps, 10'000);
  std::map<std::string, int64_t> out;
  for (auto* tp : tps) out[tp->topic()] = tp->offset();
  RdKafka::TopicPartition::destroy(tps);
  consumer->close();
  return out;
}

// The end offset of a partition of `topic`.
inline int64_t HighWatermark(const std::string& brokers, const std::string& topic, int32_t partition = 0) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", brokers, err);
  std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf.get(), err));
  int64_t low = -1, high = -1;
  p->query_watermark_offsets(topic, partition, &low, &high, 10'000);
  return high;
}

// One message as a reader saw it.
struct Seen {
  std::string key, value;
  std::map<std::string, std::string> headers;
  int64_t received_ms = 0;
};

// Reads every partition of `topic` from the beginning (assign, no group) on its own thread.
class TopicReader {
 public:
  TopicReader(const std::string& brokers, const std::string& topic, int partitions = 1) {
    std::string err;
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    conf->set("bootstrap.servers", brokers, err);
    conf->set("group.id", "test-reader", err);
    conf->set("enable.auto.commit", "false", err);
    conf->set("isolation.level", "read_uncommitted", err);
    conf->set("fetch.wait.max.ms", "10", err);
    consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), err));
    if (!consumer_) throw std::runtime_error(err);
    std::vector<RdKafka::TopicPartition*> tps;
    for (int p = 0; p < partitions; ++p) {
      tps.push_back(RdKafka::TopicPartition::create(topic, p, RdKafka::Topic::OFFSET_BEGINNING));
    }
    consumer_->assign(tps);
    RdKafka::TopicPartition::destroy(tps);
    thread_ = std::thread([this] { Run(); });
  }
  ~TopicReader() {
    stop_ = true;
    thread_.join();
    consumer_->close();
  }

  // Waits until `pred(seen so far)` holds; false after `timeout` (a guard against hangs).
  bool WaitFor(const std::function<bool(const std::vector<Seen>&)>& pred,
               std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(seen_); });
  }
  bool WaitForCount(size_t n, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    return WaitFor([n](const std::vector<Seen>& s) { return s.size() >= n; }, timeout);
  }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void Run() {
    while (!stop_) {
      std::unique_ptr<RdKafka::Message> m(consumer_->consume(20));
      if (!m || m->err() != RdKafka::ERR_NO_ERROR) continue;
      Seen s;
      s.received_ms = WallMs();
      if (m->key()) s.key = *m->key();
      s.value.assign(static_cast<const char*>(m->payload()), m->len());
      if (RdKafka::Headers* h = m->headers()) {
        for (const auto& header : h->get_all()) {
          s.headers[header.key()] = std::string(static_cast<const char*>(header.value()), header.value_size());
        }
      }
      {
        std::lock_guard lock(mu_);
        seen_.push_back(std::move(s));
      }
      cv_.notify_all();
    }
  }

  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
  std::thread thread_;
};

}  // namespace delayq::testing
