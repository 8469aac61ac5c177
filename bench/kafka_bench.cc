// The Kafka forwarder against librdkafka's mock cluster (in this process, so brokers, forwarder
// and load share the machine the same way in every scenario). One JSON line per run.
//
//   raw       consume a topic and produce every message to another (idempotent, acks=all): the
//             mock's own consume-then-produce rate, with no delay logic — the baseline.
//   forward   the forwarder on a level topic preloaded with messages already due; messages/s
//             from the moment it owns the partition until all are confirmed.
//   lateness  messages sent at --rate for --seconds with delays uniform in [0, --max-delay);
//             forward lateness (confirmed - due) from the forwarder, and received - due as a
//             reader of the target topic sees it.
//
// DELAYQ_BENCH_LOG=1 logs the forwarder and when late messages were due; DELAYQ_BENCH_DEBUG=fetch,...
// sets librdkafka's debug contexts on the forwarder's consumer.
//
//   delayq-kafka-bench raw|forward|lateness [--messages N] [--size BYTES] [--exactly-once]
//                      [--max-held N] [--partitions P] [--rate R] [--seconds S] [--max-delay MS]
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "delayq/kafka/delay_producer.h"
#include "delayq/kafka/forwarder.h"
#include "kafka/kafka_config.h"
#include "kafka/mock_cluster.h"

namespace {

using namespace delayq;
using delayq::testing::MockCluster;
using delayq::testing::WallMs;

struct Args {
  std::string scenario;
  int64_t messages = 200'000;
  size_t size = 10;
  bool exactly_once = false;
  size_t max_held = 20'000;
  int partitions = 32;
  int64_t rate = 5'000, seconds = 10, max_delay_ms = 3'000;
};

// Writes `n` messages of `size` bytes, already due and addressed to "target", spread over the
// `topics` (one partition each). The mock keeps only ~5 MB per partition, so spread wide.
void Preload(const std::string& brokers, const std::vector<std::string>& topics, int64_t n, size_t size) {
  std::string err;
  auto conf = kafka::MakeConf({{"bootstrap.servers", brokers},
                               {"linger.ms", "20"},
                               {"batch.size", "1000000"},
                               {"queue.buffering.max.messages", "1000000"}});
  std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf->get(), err));
  std::string value(size, 'x'), due = std::to_string(WallMs());
  for (int64_t i = 0; i < n; ++i) {
    RdKafka::Headers* h = RdKafka::Headers::create();
    h->add("delayq-target", "target");
    h->add("delayq-due", due);
    while (p->produce(topics[static_cast<size_t>(i) % topics.size()], 0, RdKafka::Producer::RK_MSG_COPY, value.data(),
                      value.size(), nullptr, 0, 0, h, nullptr) == RdKafka::ERR__QUEUE_FULL) {
      p->poll(10);
    }
  }
  p->flush(120'000);
  for (const auto& topic : topics) {
    int64_t low = -1, high = -1;
    p->query_watermark_offsets(topic, 0, &low, &high, 10'000);
    if (low != 0) {
      std::fprintf(stderr, "the mock dropped the start of %s (offsets %ld..%ld kept): use more --partitions\n",
                   topic.c_str(), static_cast<long>(low), static_cast<long>(high));
      std::exit(1);
    }
  }
}

std::vector<std::string> LevelTopics(MockCluster& cluster, const std::string& level, int n) {
  std::vector<std::string> topics;
  for (int i = 0; i < n; ++i) {
    topics.push_back(fmt::format("delayq.{}.{}", level, i));
    cluster.CreateTopic(topics.back());
  }
  return topics;
}

// Messages per second between the first and the last confirmation (start-up costs such as the
// idempotent producer's id request and the group join are left out, the same way for all).
struct Rate {
  std::chrono::steady_clock::time_point first, last;
  double PerSecond(int64_t n) const { return (n - 1) / std::chrono::duration<double>(last - first).count(); }
};

class Counter : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& m) override {
    if (m.err() != RdKafka::ERR_NO_ERROR) return;
    rate.last = std::chrono::steady_clock::now();
    if (confirmed++ == 0) rate.first = rate.last;
  }
  int64_t confirmed = 0;
  Rate rate;
};

void Raw(const Args& a) {
  MockCluster cluster;
  std::vector<std::string> topics = LevelTopics(cluster, "1s", a.partitions);
  cluster.CreateTopic("target");
  Preload(cluster.bootstraps(), topics, a.messages, a.size);
  std::string err;
  auto cconf = kafka::MakeConf({{"bootstrap.servers", cluster.bootstraps()},
                                {"group.id", "raw"},
                                {"enable.auto.commit", "false"},
                                {"fetch.wait.max.ms", "100"}});
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(cconf->get(), err));
  Counter counter;
  auto pconf = kafka::MakeConf(kafka::ProducerSettings(cluster.bootstraps(), {}));
  (*pconf)->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&counter), err);
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(pconf->get(), err));
  std::vector<RdKafka::TopicPartition*> tps;
  for (const auto& t : topics) tps.push_back(RdKafka::TopicPartition::create(t, 0, RdKafka::Topic::OFFSET_BEGINNING));
  consumer->assign(tps);
  std::map<std::string, int64_t> next_offset;
  auto last_commit = std::chrono::steady_clock::now();
  int64_t consumed = 0;
  while (counter.confirmed < a.messages) {
    std::unique_ptr<RdKafka::Message> m(consumer->consume(consumed < a.messages ? 100 : 0));
    if (m->err() == RdKafka::ERR_NO_ERROR) {
      ++consumed;
      next_offset[m->topic_name()] = m->offset() + 1;
      RdKafka::Headers* h = RdKafka::Headers::create(m->headers()->get_all());
      while (producer->produce("target", RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY, m->payload(),
                               m->len(), m->key_pointer(), m->key_len(), 0, h, nullptr) == RdKafka::ERR__QUEUE_FULL) {
        producer->poll(10);
      }
    }
    producer->poll(consumed < a.messages ? 0 : 10);
    if (std::chrono::steady_clock::now() - last_commit > std::chrono::milliseconds(100)) {
      std::vector<RdKafka::TopicPartition*> offsets;
      for (auto& [t, o] : next_offset) offsets.push_back(RdKafka::TopicPartition::create(t, 0, o));
      consumer->commitAsync(offsets);
      RdKafka::TopicPartition::destroy(offsets);
      last_commit = std::chrono::steady_clock::now();
    }
  }
  RdKafka::TopicPartition::destroy(tps);
  consumer->close();
  std::printf("{\"scenario\":\"raw\",\"messages\":%ld,\"size\":%zu,\"partitions\":%d,\"msgs_per_s\":%.0f}\n",
              static_cast<long>(a.messages), a.size, a.partitions, counter.rate.PerSecond(a.messages));
}

uint64_t Forwarded(const kafka::ForwarderStats& s) {
  uint64_t n = 0;
  for (const auto& l : s.levels) n += l.forwarded;
  return n;
}

std::unique_ptr<kafka::Forwarder> StartForwarder(const MockCluster& cluster, const Args& a, const std::string& levels,
                                                 int topics_per_level = 1) {
  kafka::ForwarderOptions o;
  o.brokers = cluster.bootstraps();
  o.levels = levels;
  o.topics_per_level = topics_per_level;
  o.exactly_once = a.exactly_once;
  o.max_held_per_partition = a.max_held;
  o.group = "bench";
  o.transactional_id = "bench-forwarder";
  if (const char* debug = std::getenv("DELAYQ_BENCH_DEBUG")) o.consumer_config["debug"] = debug;
  // KEY=VALUE, to try librdkafka settings on the forwarder's producer or consumer.
  for (auto [env, config] : {std::pair{"DELAYQ_BENCH_PRODUCER", &o.producer_config},
                             std::pair{"DELAYQ_BENCH_CONSUMER", &o.consumer_config}}) {
    if (const char* kv = std::getenv(env)) {
      std::string setting = kv;
      (*config)[setting.substr(0, setting.find('='))] = setting.substr(setting.find('=') + 1);
    }
  }
  auto f = kafka::Forwarder::Create(o);
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(f);
}

void Forward(const Args& a) {
  MockCluster cluster;
  std::vector<std::string> topics = LevelTopics(cluster, "1s", a.partitions);
  LevelTopics(cluster, "5s", a.partitions);
  cluster.CreateTopic("delayq.dead");
  cluster.CreateTopic("target");
  Preload(cluster.bootstraps(), topics, a.messages, a.size);
  auto forwarder = StartForwarder(cluster, a, "1s,5s", a.partitions);
  std::thread runner([&] { (void)forwarder->Run(); });
  Rate rate;
  uint64_t forwarded = 0;
  while (forwarded < static_cast<uint64_t>(a.messages)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // sampling the counter: a benchmark, not a test
    uint64_t now = Forwarded(forwarder->Stats());
    if (forwarded == 0 && now > 0) rate.first = std::chrono::steady_clock::now();
    forwarded = now;
  }
  rate.last = std::chrono::steady_clock::now();
  kafka::ForwarderStats stats = forwarder->Stats();
  forwarder->Stop();
  runner.join();
  std::printf(
      "{\"scenario\":\"forward\",\"mode\":\"%s\",\"messages\":%ld,\"size\":%zu,\"partitions\":%d,"
      "\"msgs_per_s\":%.0f,\"transactions\":%lu,\"batch_p50_ms\":%.3f}\n",
      a.exactly_once ? "exactly-once" : "at-least-once", static_cast<long>(a.messages), a.size, a.partitions,
      rate.PerSecond(a.messages), static_cast<unsigned long>(stats.transactions), stats.batch.p50_ms);
}

void Lateness(const Args& a) {
  MockCluster cluster;
  const std::string levels = "100ms,500ms,1s,2s";
  for (const char* l : {"100ms", "500ms", "1s", "2s"}) cluster.CreateTopic(fmt::format("delayq.{}.0", l));
  cluster.CreateTopic("delayq.dead");
  cluster.CreateTopic("target");
  auto forwarder = StartForwarder(cluster, a, levels);
  std::thread runner([&] { (void)forwarder->Run(); });
  while (forwarder->Stats().assigned.size() < 4) std::this_thread::yield();
  delayq::testing::TopicReader reader(cluster.bootstraps(), "target");
  auto producer = kafka::DelayProducer::Create({.brokers = cluster.bootstraps(), .levels = levels});
  // The producer's first message waits for its producer id and metadata (~1 s on the mock): not
  // the forwarder's lateness, so it is paid before the clock starts.
  // The same holds for the forwarder's first message to a target topic (its metadata).
  (void)(*producer)->Send({.target_topic = "target", .value = "warm-up"});
  (void)(*producer)->Flush(std::chrono::seconds(30));
  reader.WaitForCount(1, std::chrono::seconds(30));
  const int64_t n = a.rate * a.seconds;
  std::mt19937_64 rng(7);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    if (i % (a.rate / 100) == 0)
      std::this_thread::sleep_until(start + std::chrono::microseconds(i * 1'000'000 / a.rate));
    int64_t due = WallMs() + static_cast<int64_t>(rng() % static_cast<uint64_t>(a.max_delay_ms));
    std::string value = std::to_string(due);
    value.resize(std::max(a.size, value.size()), ' ');
    (void)(*producer)->Send({.target_topic = "target", .value = std::move(value), .due_ms = due});
  }
  (void)(*producer)->Flush(std::chrono::seconds(60));
  reader.WaitForCount(static_cast<size_t>(n) + 1, std::chrono::seconds(120));
  kafka::ForwarderStats stats = forwarder->Stats();
  forwarder->Stop();
  runner.join();
  std::vector<int64_t> late;
  int64_t early = 0;
  for (const auto& s : reader.seen()) {
    if (s.value == "warm-up") continue;
    int64_t l = s.received_ms - std::stoll(s.value);
    if (l < 0) ++early;
    late.push_back(l);
  }
  if (std::getenv("DELAYQ_BENCH_LOG")) {  // when were the late ones due (start-up effects show here)
    std::map<int64_t, int> by_time;
    int64_t first = INT64_MAX;
    for (const auto& s : reader.seen()) {
      if (s.value != "warm-up") first = std::min<int64_t>(first, std::stoll(s.value));
    }
    for (const auto& s : reader.seen()) {
      if (s.value != "warm-up" && s.received_ms - std::stoll(s.value) > 100)
        ++by_time[(std::stoll(s.value) - first) / 250];
    }
    for (auto& [k, v] : by_time) std::fprintf(stderr, "late>100ms due at +%ldms: %d\n", (long)(k * 250), v);
  }
  std::sort(late.begin(), late.end());
  auto pct = [&](double q) {
    return late.empty() ? -1 : late[std::min(late.size() - 1, static_cast<size_t>(q * late.size()))];
  };
  uint64_t cascaded = 0;
  for (const auto& l : stats.levels) cascaded += l.cascaded;
  std::printf(
      "{\"scenario\":\"lateness\",\"mode\":\"%s\",\"max_held\":%zu,\"messages\":%ld,\"received\":%zu,"
      "\"cascaded\":%lu,\"forward_p50_ms\":%.3f,\"forward_p99_ms\":%.3f,"
      "\"reader_p50_ms\":%ld,\"reader_p99_ms\":%ld,\"reader_max_ms\":%ld,\"early\":%ld}\n",
      a.exactly_once ? "exactly-once" : "at-least-once", a.max_held, static_cast<long>(n), late.size(),
      static_cast<unsigned long>(cascaded), stats.lateness.p50_ms, stats.lateness.p99_ms, static_cast<long>(pct(0.5)),
      static_cast<long>(pct(0.99)), static_cast<long>(late.empty() ? -1 : late.back()), static_cast<long>(early));
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc < 2) {
    std::fprintf(stderr, "usage: delayq-kafka-bench raw|forward|lateness [options]; see the source's header\n");
    return 2;
  }
  a.scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", f.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (f == "--messages") a.messages = std::stoll(next());
    else if (f == "--size") a.size = std::stoul(next());
    else if (f == "--exactly-once") a.exactly_once = true;
    else if (f == "--partitions") a.partitions = std::stoi(next());
    else if (f == "--max-held") a.max_held = std::stoul(next());
    else if (f == "--rate") a.rate = std::stoll(next());
    else if (f == "--seconds") a.seconds = std::stoll(next());
    else if (f == "--max-delay") a.max_delay_ms = std::stoll(next());
    else {
      std::fprintf(stderr, "unknown option %s\n", f.c_str());
      return 2;
    }
  }
  spdlog::set_level(std::getenv("DELAYQ_BENCH_LOG") ? spdlog::level::info : spdlog::level::warn);
  if (a.scenario == "raw") Raw(a);
  else if (a.scenario == "forward") Forward(a);
  else if (a.scenario == "lateness") Lateness(a);
  else {
    std::fprintf(stderr, "unknown scenario %s: raw, forward or lateness\n", a.scenario.c_str());
    return 2;
  }
  return 0;
}
