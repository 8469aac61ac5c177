// The forwarder's loop. One thread owns all state: it polls the consumer, acts on what is due,
// serves the producer's delivery reports and commits. librdkafka calls back (rebalance, delivery)
// only from inside the consume/poll/flush calls made here, so nothing needs a lock but the
// statistics that other threads read.
#include "delayq/kafka/forwarder.h"

#include <fmt/format.h>
#include <librdkafka/rdkafkacpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <unordered_map>

#include "core/histogram.h"
#include "kafka/forwarder_metrics.h"
#include "kafka/kafka_config.h"
#include "kafka/offset_tracker.h"

namespace delayq::kafka {
namespace {

constexpr int kMaxWaitMs = 100;       // longest consume() wait: stop, commits and lag stay fresh
constexpr int kDrainPerLoop = 5'000;  // messages taken from the consumer before acting
constexpr int64_t kRetryMs = 1'000;   // a forward that failed transiently is retried after this
constexpr int64_t kLagRefreshMs = 1'000;
constexpr size_t kMaxTargetHandles = 10'000;  // target topics whose metadata is fetched ahead

struct PartitionState {
  std::string topic;
  int32_t partition = 0;
  size_t level = 0;
  OffsetTracker offsets;
  int64_t committed = -1;  // last commit point sent
  size_t held = 0;
  bool paused = false;
  bool revoked = false;
};

enum class Action { kForward, kCascade, kDead };

// A message read from a level topic and not yet finished.
struct Held {
  std::unique_ptr<RdKafka::Message> message;
  std::shared_ptr<PartitionState> partition;
  int64_t offset = 0;
  Status routing_error;  // why it goes to the dead topic (ok: it has a target and due time)
  std::string target;
  int64_t due_ms = 0;
  Action action = Action::kForward;  // what the producer is doing with it
};

struct TimerEntry {
  int64_t at_ms;
  uint64_t seq;
  Held* held;
  bool operator>(const TimerEntry& o) const { return at_ms != o.at_ms ? at_ms > o.at_ms : seq > o.seq; }
};

const std::string* FindHeader(const RdKafka::Headers* headers, std::string_view name, std::string& storage) {
  if (headers == nullptr) return nullptr;
  RdKafka::Headers::Header h = headers->get_last(std::string(name));
  if (h.err() != RdKafka::ERR_NO_ERROR || h.value() == nullptr) return nullptr;
  storage.assign(static_cast<const char*>(h.value()), h.value_size());
  return &storage;
}

std::string DefaultTransactionalId(const std::string& group) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("{}-{}-{}", group, host, getpid());
}

bool PermanentProduceError(RdKafka::ErrorCode err) {
  switch (err) {
    case RdKafka::ERR__UNKNOWN_TOPIC:
    case RdKafka::ERR_UNKNOWN_TOPIC_OR_PART:
    case RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED:
    case RdKafka::ERR_MSG_SIZE_TOO_LARGE:
    case RdKafka::ERR_INVALID_MSG:
    case RdKafka::ERR_INVALID_RECORD:
    case RdKafka::ERR_TOPIC_EXCEPTION: return true;
    default: return false;
  }
}

}  // namespace

// The loop's state; its methods are defined below in this order, the loop (Run) first.
class Forwarder::Impl : public RdKafka::RebalanceCb, public RdKafka::DeliveryReportCb {
 public:
  Impl(ForwarderOptions options, Levels levels)
      : options_(std::move(options)),
        levels_(std::move(levels)),
        clock_(options_.clock ? options_.clock : SystemClock::Instance()),
        metrics_(levels_) {}

  ~Impl() override { DropAll(); }

  Status Start();
  Status Run();

  void Stop() { stop_.store(true, std::memory_order_release); }

  ForwarderMetrics& metrics() { return metrics_; }

  // RdKafka::RebalanceCb — called from inside consume().
  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override;

  // RdKafka::DeliveryReportCb — called from inside poll()/flush() on this thread.
  void dr_cb(RdKafka::Message& report) override;

 private:
  Status CheckTopics();
  int WaitMs() const;

  // Takes one message from the consumer; false when there was none.
  bool Intake(std::unique_ptr<RdKafka::Message> message);

  // Asks for a target topic's metadata when its first message is read rather than when it is
  // due: librdkafka holds a message for an unknown topic until the metadata arrives (~1 s on the
  // mock cluster), which would make the first message to each target late.
  void WarmUp(const std::string& target);
  void Schedule(Held* held, int64_t at_ms);

  // Acts on every message whose time has come.
  Status ActOnDue();

  // At-least-once: produce; each delivery report finishes its message.
  Status ProduceEach(const std::vector<Held*>& batch, int64_t now_ms);

  // Exactly-once: the batch's messages and the offsets past them commit together, or neither.
  Status ProduceInTransaction(const std::vector<Held*>& batch, int64_t now_ms);
  std::unique_ptr<RdKafka::Error> CommitTransaction();

  // Produces `held` where it goes now; `opaque` comes back in its delivery report.
  RdKafka::ErrorCode Produce(Held* held, int64_t now_ms, Held* opaque);
  void Count(const Held& held, int64_t now_us);

  // The message is done: its offset may be committed once the ones before it are.
  void Finish(Held* held);
  void SetPaused(PartitionState& p, bool paused);
  void ResumeDrained();

  // Commits the commit point of each partition (only `which`, when given) that moved.
  void Commit(bool sync, const std::vector<RdKafka::TopicPartition*>* which);
  Status CheckFatal();
  void PublishPartitions();
  void DropRevoked();
  void DropAll();
  void Shutdown();

  ForwarderOptions options_;
  Levels levels_;
  std::shared_ptr<Clock> clock_;
  ForwarderMetrics metrics_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  std::unique_ptr<RdKafka::Producer> producer_;
  std::vector<std::unique_ptr<RdKafka::Topic>> topic_handles_;  // keeps level topics' metadata warm
  std::unordered_map<std::string, std::unique_ptr<RdKafka::Topic>> target_handles_;  // and targets'

  std::map<std::pair<std::string, int32_t>, std::shared_ptr<PartitionState>> partitions_;
  std::vector<TimerEntry> timers_;  // a min-heap on (at_ms, seq)
  uint64_t next_seq_ = 0;
  uint64_t next_topic_ = 0;
  std::atomic<bool> stop_{false};
};

Status Forwarder::Impl::Start() {
  std::map<std::string, std::string> consumer = {
      {"session.timeout.ms", "10000"},
      {"heartbeat.interval.ms", "1000"},
      {"fetch.wait.max.ms", "10"},  // a cascaded message is read again soon after it is written
  };
  for (const auto& [k, v] : options_.consumer_config) consumer[k] = v;
  consumer["bootstrap.servers"] = options_.brokers;
  consumer["group.id"] = options_.group;
  consumer["enable.auto.commit"] = "false";
  consumer["enable.auto.offset.store"] = "false";
  consumer["auto.offset.reset"] = "earliest";
  consumer["isolation.level"] = "read_committed";
  consumer["partition.assignment.strategy"] = "cooperative-sticky";
  Result<std::unique_ptr<RdKafka::Conf>> cconf = MakeConf(consumer);
  if (!cconf.ok()) return cconf.status();
  std::string error;
  (*cconf)->set("rebalance_cb", static_cast<RdKafka::RebalanceCb*>(this), error);

  // Connected to every broker and knowing every level topic from the start, so the first
  // cascade or dead letter does not wait for a connection and a metadata round trip.
  std::map<std::string, std::string> producer = {{"enable.sparse.connections", "false"}};
  for (const auto& [k, v] : ProducerSettings(options_.brokers, options_.producer_config)) producer[k] = v;
  if (options_.exactly_once) {
    producer["transactional.id"] =
        options_.transactional_id.empty() ? DefaultTransactionalId(options_.group) : options_.transactional_id;
  }
  Result<std::unique_ptr<RdKafka::Conf>> pconf = MakeConf(producer);
  if (!pconf.ok()) return pconf.status();
  (*pconf)->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(this), error);

  consumer_.reset(RdKafka::KafkaConsumer::create(cconf->get(), error));
  if (!consumer_) return Status::InvalidArgument(fmt::format("cannot create the Kafka consumer: {}", error));
  producer_.reset(RdKafka::Producer::create(pconf->get(), error));
  if (!producer_) return Status::InvalidArgument(fmt::format("cannot create the Kafka producer: {}", error));

  DELAYQ_RETURN_IF_ERROR(CheckTopics());
  std::vector<std::string> outputs = levels_.AllTopics();
  outputs.push_back(levels_.DeadTopic());
  for (const std::string& topic : outputs) {
    std::unique_ptr<RdKafka::Topic> handle(RdKafka::Topic::create(producer_.get(), topic, nullptr, error));
    if (handle) topic_handles_.push_back(std::move(handle));
  }
  if (options_.exactly_once) {
    std::unique_ptr<RdKafka::Error> err(
        producer_->init_transactions(static_cast<int>(options_.startup_timeout.count())));
    if (err) {
      return Status::Unavailable(
          fmt::format("cannot start Kafka transactions for --exactly-once (transactional.id {}): {}",
                      producer["transactional.id"], err->str()));
    }
  }
  return Status::Ok();
}

Status Forwarder::Impl::Run() {
  RdKafka::ErrorCode err = consumer_->subscribe(levels_.AllTopics());
  if (err != RdKafka::ERR_NO_ERROR) {
    return Status::Unavailable(fmt::format("cannot subscribe to the level topics: {}", RdKafka::err2str(err)));
  }
  spdlog::info("forwarding {} level topics as group {} ({})", levels_.AllTopics().size(), options_.group,
               options_.exactly_once ? "exactly-once" : "at-least-once");
  Status status;
  int64_t last_commit_ms = 0, last_lag_ms = 0;
  while (!stop_.load(std::memory_order_acquire) && status.ok()) {
    std::unique_ptr<RdKafka::Message> message(consumer_->consume(WaitMs()));
    int taken = 0;  // take what is already fetched, up to a bound, without waiting again
    while (Intake(std::move(message)) && ++taken < kDrainPerLoop) message.reset(consumer_->consume(0));
    producer_->poll(0);
    status = ActOnDue();
    int64_t now_ms = clock_->NowMs();
    if (!options_.exactly_once && now_ms - last_commit_ms >= options_.commit_interval.count()) {
      Commit(/*sync=*/false, nullptr);
      last_commit_ms = now_ms;
    }
    ResumeDrained();
    if (now_ms - last_lag_ms >= kLagRefreshMs) {
      PublishPartitions();
      last_lag_ms = now_ms;
    }
    if (status.ok()) status = CheckFatal();
  }
  Shutdown();
  return status;
}

void Forwarder::Impl::rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                                   std::vector<RdKafka::TopicPartition*>& partitions) {
  bool cooperative = consumer->rebalance_protocol() == "COOPERATIVE";
  ++metrics_.rebalances;
  if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
    for (RdKafka::TopicPartition* tp : partitions) {
      auto state = std::make_shared<PartitionState>();
      state->topic = tp->topic();
      state->partition = tp->partition();
      state->level = static_cast<size_t>(std::max(0, levels_.LevelOfTopic(tp->topic())));
      partitions_[{tp->topic(), tp->partition()}] = std::move(state);
    }
    if (cooperative) {
      std::unique_ptr<RdKafka::Error> e(consumer->incremental_assign(partitions));
      if (e) spdlog::error("cannot take the assigned partitions: {}", e->str());
    } else {
      consumer->assign(partitions);
    }
    spdlog::info("assigned {} level partitions (now {})", partitions.size(), partitions_.size());
  } else {
    // Revoked (or lost): finish what is in flight and commit it, so the next owner starts
    // where we stopped; what is held but not due is given back uncommitted.
    if (!consumer->assignment_lost()) {
      if (!options_.exactly_once) {
        producer_->flush(5'000);
        Commit(/*sync=*/true, &partitions);
      }
    }
    for (RdKafka::TopicPartition* tp : partitions) {
      auto it = partitions_.find({tp->topic(), tp->partition()});
      if (it == partitions_.end()) continue;
      it->second->revoked = true;
      metrics_.held[it->second->level] -= static_cast<int64_t>(it->second->held);
      partitions_.erase(it);
    }
    DropRevoked();
    if (cooperative) {
      std::unique_ptr<RdKafka::Error> e(consumer->incremental_unassign(partitions));
      if (e) spdlog::error("cannot give back the revoked partitions: {}", e->str());
    } else {
      consumer->unassign();
    }
    spdlog::info("revoked {} level partitions (now {})", partitions.size(), partitions_.size());
  }
  PublishPartitions();
}

void Forwarder::Impl::dr_cb(RdKafka::Message& report) {
  auto* held = static_cast<Held*>(report.msg_opaque());
  if (report.err() != RdKafka::ERR_NO_ERROR) ++metrics_.produce_errors;
  if (held == nullptr) return;  // exactly-once: the transaction's outcome decides
  if (report.err() == RdKafka::ERR_NO_ERROR) {
    Count(*held, clock_->NowUs());
    Finish(held);
    return;
  }
  spdlog::warn("producing {} offset {} to {} failed: {}", held->partition->topic, held->offset, report.topic_name(),
               report.errstr());
  if (held->action == Action::kForward && PermanentProduceError(report.err())) {
    held->routing_error =
        Status::InvalidArgument(fmt::format("target topic {} refused the message: {}", held->target, report.errstr()));
    Schedule(held, clock_->NowMs());
  } else {
    Schedule(held, clock_->NowMs() + kRetryMs);
  }
}

Status Forwarder::Impl::CheckTopics() {
  RdKafka::Metadata* raw = nullptr;
  RdKafka::ErrorCode err = consumer_->metadata(true, nullptr, &raw, static_cast<int>(options_.startup_timeout.count()));
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  if (err != RdKafka::ERR_NO_ERROR) {
    return Status::Unavailable(
        fmt::format("cannot reach the Kafka brokers at {} within {} ms ({}); check --brokers and that Kafka is up",
                    options_.brokers, options_.startup_timeout.count(), RdKafka::err2str(err)));
  }
  std::set<std::string> existing;
  for (const RdKafka::TopicMetadata* t : *metadata->topics()) {
    if (t->err() == RdKafka::ERR_NO_ERROR) existing.insert(t->topic());
  }
  std::vector<std::string> missing;
  for (const std::string& topic : levels_.AllTopics()) {
    if (!existing.contains(topic)) missing.push_back(topic);
  }
  if (!missing.empty()) {
    return Status::NotFound(
        fmt::format("level topics missing on {}: {}; create each with one partition (kafka-topics.sh --create "
                    "--topic {} --partitions 1) or match --levels, --topics-per-level and --prefix to the ones "
                    "that exist",
                    options_.brokers, fmt::join(missing, ", "), missing.front()));
  }
  if (!existing.contains(levels_.DeadTopic())) {
    spdlog::warn(
        "the dead-letter topic {} does not exist; messages without valid delayq headers "
        "will wait (uncommitted) until it is created",
        levels_.DeadTopic());
  }
  return Status::Ok();
}

int Forwarder::Impl::WaitMs() const {
  if (timers_.empty()) return kMaxWaitMs;
  int64_t until_us = timers_.front().at_ms * 1000 - clock_->NowUs();
  if (until_us <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(kMaxWaitMs, (until_us + 999) / 1000));
}

bool Forwarder::Impl::Intake(std::unique_ptr<RdKafka::Message> message) {
  if (!message) return false;
  if (message->err() == RdKafka::ERR__TIMED_OUT || message->err() == RdKafka::ERR__PARTITION_EOF) return false;
  if (message->err() != RdKafka::ERR_NO_ERROR) {
    spdlog::warn("consumer: {}", message->errstr());
    return false;
  }
  auto it = partitions_.find({message->topic_name(), message->partition()});
  if (it == partitions_.end()) return true;  // from a partition just revoked
  auto held = std::make_unique<Held>();
  held->partition = it->second;
  held->offset = message->offset();
  std::string target_storage, due_storage;
  RdKafka::Headers* headers = message->headers();
  Result<Routing> routing =
      ParseRouting(FindHeader(headers, kTargetHeader, target_storage), FindHeader(headers, kDueHeader, due_storage));
  int64_t act_ms = clock_->NowMs();
  if (routing.ok()) {
    WarmUp(routing->target);
    held->target = std::move(routing->target);
    held->due_ms = routing->due_ms;
    RdKafka::MessageTimestamp ts = message->timestamp();
    int64_t appended_ms = ts.type == RdKafka::MessageTimestamp::MSG_TIMESTAMP_NOT_AVAILABLE ? act_ms : ts.timestamp;
    act_ms = std::min(held->due_ms, appended_ms + levels_.level_ms(held->partition->level));
  } else {
    held->routing_error = routing.status();
  }
  held->message = std::move(message);
  PartitionState& p = *held->partition;
  p.offsets.Add(held->offset);
  ++p.held;
  ++metrics_.held[p.level];
  if (p.held >= options_.max_held_per_partition && !p.paused) SetPaused(p, true);
  Schedule(held.release(), act_ms);
  return true;
}

void Forwarder::Impl::WarmUp(const std::string& target) {
  if (target_handles_.size() >= kMaxTargetHandles || target_handles_.contains(target)) return;
  std::string error;
  std::unique_ptr<RdKafka::Topic> handle(RdKafka::Topic::create(producer_.get(), target, nullptr, error));
  if (handle) target_handles_.emplace(target, std::move(handle));
}

void Forwarder::Impl::Schedule(Held* held, int64_t at_ms) {
  timers_.push_back({at_ms, next_seq_++, held});
  std::push_heap(timers_.begin(), timers_.end(), std::greater<>());
}

Status Forwarder::Impl::ActOnDue() {
  int64_t now_ms = clock_->NowMs();
  if (timers_.empty() || timers_.front().at_ms > now_ms) return Status::Ok();
  int64_t started_us = clock_->NowUs();
  std::vector<Held*> batch;
  while (!timers_.empty() && timers_.front().at_ms <= now_ms && batch.size() < options_.max_batch) {
    std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
    Held* held = timers_.back().held;
    timers_.pop_back();
    if (held->partition->revoked) {
      delete held;
      continue;
    }
    if (held->routing_error.ok() && held->due_ms > now_ms) {
      int64_t remaining = held->due_ms - now_ms;
      if (remaining < levels_.smallest_ms()) {  // shorter than any level: wait here
        Schedule(held, held->due_ms);
        continue;
      }
    }
    batch.push_back(held);
  }
  if (batch.empty()) return Status::Ok();
  Status status = options_.exactly_once ? ProduceInTransaction(batch, now_ms) : ProduceEach(batch, now_ms);
  metrics_.RecordBatch(clock_->NowUs() - started_us);
  return status;
}

Status Forwarder::Impl::ProduceEach(const std::vector<Held*>& batch, int64_t now_ms) {
  for (Held* held : batch) {
    RdKafka::ErrorCode err = Produce(held, now_ms, held);
    if (err != RdKafka::ERR_NO_ERROR) {
      ++metrics_.produce_errors;
      spdlog::warn("cannot produce {} offset {}: {}", held->partition->topic, held->offset, RdKafka::err2str(err));
      Schedule(held, now_ms + kRetryMs);
    }
  }
  return Status::Ok();
}

Status Forwarder::Impl::ProduceInTransaction(const std::vector<Held*>& batch, int64_t now_ms) {
  std::unique_ptr<RdKafka::Error> err(producer_->begin_transaction());
  if (err) return Status::Unavailable(fmt::format("cannot begin a Kafka transaction: {}", err->str()));
  bool produced_all = true;
  for (Held* held : batch) {
    if (Produce(held, now_ms, nullptr) != RdKafka::ERR_NO_ERROR) {
      produced_all = false;
      break;
    }
  }
  std::map<std::pair<std::string, int32_t>, PartitionState*> touched;
  for (Held* held : batch) {
    held->partition->offsets.SetDone(held->offset, true);
    touched[{held->partition->topic, held->partition->partition}] = held->partition.get();
  }
  std::string failure = produced_all ? "" : "a message of the batch could not be produced";
  if (produced_all) {
    std::vector<RdKafka::TopicPartition*> offsets;
    for (auto& [key, p] : touched) {
      offsets.push_back(RdKafka::TopicPartition::create(p->topic, p->partition, p->offsets.CommitPoint()));
    }
    std::unique_ptr<RdKafka::ConsumerGroupMetadata> group(consumer_->groupMetadata());
    err.reset(producer_->send_offsets_to_transaction(offsets, group.get(), 30'000));
    RdKafka::TopicPartition::destroy(offsets);
    if (!err) err = CommitTransaction();
    if (err && err->is_fatal()) {
      return Status::Unavailable(fmt::format("fatal Kafka transaction error: {}", err->str()));
    }
    if (err) failure = err->str();
  }
  if (failure.empty()) {
    ++metrics_.transactions;
    int64_t now_us = clock_->NowUs();
    for (Held* held : batch) {
      Count(*held, now_us);
      Finish(held);
    }
    return Status::Ok();
  }
  spdlog::warn("aborting a transaction of {} messages: {}", batch.size(), failure);
  std::unique_ptr<RdKafka::Error> abort(producer_->abort_transaction(30'000));
  if (abort) return Status::Unavailable(fmt::format("cannot abort a Kafka transaction: {}", abort->str()));
  ++metrics_.aborted_transactions;
  for (Held* held : batch) {
    held->partition->offsets.SetDone(held->offset, false);
    Schedule(held, now_ms);  // retried in the next batch
  }
  return Status::Ok();
}

std::unique_ptr<RdKafka::Error> Forwarder::Impl::CommitTransaction() {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<RdKafka::Error> err(producer_->commit_transaction(30'000));
    if (!err || !err->is_retriable() || attempt >= 3 || err->txn_requires_abort()) return err;
  }
}

RdKafka::ErrorCode Forwarder::Impl::Produce(Held* held, int64_t now_ms, Held* opaque) {
  RdKafka::Message& m = *held->message;
  std::string topic;
  std::unique_ptr<RdKafka::Headers> headers(RdKafka::Headers::create());
  RdKafka::Headers* original = m.headers();
  std::vector<RdKafka::Headers::Header> kept = original ? original->get_all() : std::vector<RdKafka::Headers::Header>{};
  if (!held->routing_error.ok()) {
    held->action = Action::kDead;
    topic = levels_.DeadTopic();
    for (const auto& h : kept) headers->add(h.key(), h.value(), h.value_size());
    headers->add(std::string(kErrorHeader), held->routing_error.message());
  } else if (held->due_ms <= now_ms) {
    held->action = Action::kForward;
    topic = held->target;
    for (const auto& h : kept) {
      if (h.key() != kTargetHeader && h.key() != kDueHeader) headers->add(h.key(), h.value(), h.value_size());
    }
  } else {
    held->action = Action::kCascade;
    size_t level = levels_.LevelFor(held->due_ms - now_ms);
    topic =
        levels_.TopicName(level, static_cast<int>(next_topic_++ % static_cast<uint64_t>(levels_.topics_per_level())));
    for (const auto& h : kept) headers->add(h.key(), h.value(), h.value_size());
  }
  for (;;) {
    RdKafka::ErrorCode err = producer_->produce(topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
                                                const_cast<void*>(m.payload()), m.len(), m.key_pointer(), m.key_len(),
                                                0, headers.get(), opaque);
    if (err == RdKafka::ERR__QUEUE_FULL) {
      producer_->poll(10);  // deliveries free room
      continue;
    }
    if (err == RdKafka::ERR_NO_ERROR) (void)headers.release();  // owned by librdkafka now
    return err;
  }
}

void Forwarder::Impl::Count(const Held& held, int64_t now_us) {
  size_t level = held.partition->level;
  switch (held.action) {
    case Action::kForward:
      metrics_.RecordLateness(std::max<int64_t>(0, now_us - held.due_ms * 1000));
      ++metrics_.forwarded[level];
      break;
    case Action::kCascade: ++metrics_.cascaded[level]; break;
    case Action::kDead: ++metrics_.dead[level]; break;
  }
}

void Forwarder::Impl::Finish(Held* held) {
  PartitionState& p = *held->partition;
  if (!p.revoked) {
    p.offsets.SetDone(held->offset, true);
    p.offsets.Compact();
    --p.held;
    --metrics_.held[p.level];
  }
  delete held;
}

void Forwarder::Impl::SetPaused(PartitionState& p, bool paused) {
  std::vector<RdKafka::TopicPartition*> tps = {RdKafka::TopicPartition::create(p.topic, p.partition)};
  RdKafka::ErrorCode err = paused ? consumer_->pause(tps) : consumer_->resume(tps);
  RdKafka::TopicPartition::destroy(tps);
  if (err == RdKafka::ERR_NO_ERROR) p.paused = paused;
}

void Forwarder::Impl::ResumeDrained() {
  for (auto& [key, p] : partitions_) {
    if (p->paused && p->held <= options_.max_held_per_partition / 2) SetPaused(*p, false);
  }
}

void Forwarder::Impl::Commit(bool sync, const std::vector<RdKafka::TopicPartition*>* which) {
  std::vector<RdKafka::TopicPartition*> offsets;
  auto add = [&](PartitionState& p) {
    int64_t point = p.offsets.CommitPoint();
    if (point >= 0 && point != p.committed) {
      offsets.push_back(RdKafka::TopicPartition::create(p.topic, p.partition, point));
      p.committed = point;
    }
  };
  if (which != nullptr) {
    for (RdKafka::TopicPartition* tp : *which) {
      auto it = partitions_.find({tp->topic(), tp->partition()});
      if (it != partitions_.end()) add(*it->second);
    }
  } else {
    for (auto& [key, p] : partitions_) add(*p);
  }
  if (offsets.empty()) return;
  RdKafka::ErrorCode err = sync ? consumer_->commitSync(offsets) : consumer_->commitAsync(offsets);
  if (err != RdKafka::ERR_NO_ERROR) {
    spdlog::warn("committing offsets failed ({}); they are committed again later", RdKafka::err2str(err));
    for (RdKafka::TopicPartition* tp : offsets) {
      auto it = partitions_.find({tp->topic(), tp->partition()});
      if (it != partitions_.end()) it->second->committed = -1;
    }
  }
  RdKafka::TopicPartition::destroy(offsets);
}

Status Forwarder::Impl::CheckFatal() {
  std::string reason;
  RdKafka::ErrorCode err = producer_->fatal_error(reason);
  if (err != RdKafka::ERR_NO_ERROR) {
    return Status::Unavailable(
        fmt::format("fatal Kafka producer error: {} ({}); restart the forwarder, "
                    "uncommitted messages are read again",
                    reason, RdKafka::err2str(err)));
  }
  return Status::Ok();
}

void Forwarder::Impl::PublishPartitions() {
  std::vector<ForwarderStats::Partition> out;
  for (auto& [key, p] : partitions_) {
    int64_t low = 0, high = 0;
    int64_t lag = -1;
    int64_t position = p->offsets.CommitPoint();
    if (consumer_->get_watermark_offsets(p->topic, p->partition, &low, &high) == RdKafka::ERR_NO_ERROR && high >= 0) {
      lag = high - std::max(position, low);
      if (lag < 0) lag = 0;
    }
    out.push_back({p->topic, p->partition, lag, p->paused});
  }
  metrics_.SetPartitions(std::move(out));
}

void Forwarder::Impl::DropRevoked() {
  std::vector<TimerEntry> kept;
  for (TimerEntry& e : timers_) {
    if (e.held->partition->revoked) {
      delete e.held;
    } else {
      kept.push_back(e);
    }
  }
  timers_ = std::move(kept);
  std::make_heap(timers_.begin(), timers_.end(), std::greater<>());
}

void Forwarder::Impl::DropAll() {
  for (TimerEntry& e : timers_) delete e.held;
  timers_.clear();
}

void Forwarder::Impl::Shutdown() {
  spdlog::info("stopping: finishing {} messages in flight, giving back {} not due", producer_->outq_len(),
               timers_.size());
  if (!options_.exactly_once) {
    producer_->flush(10'000);
    Commit(/*sync=*/true, nullptr);
  }
  consumer_->close();  // revokes (committing again if needed) and leaves the group
  DropAll();
  partitions_.clear();
  PublishPartitions();
}

Forwarder::Forwarder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Forwarder::~Forwarder() = default;

Result<std::unique_ptr<Forwarder>> Forwarder::Create(ForwarderOptions options) {
  if (options.brokers.empty()) return Status::InvalidArgument("--brokers is empty; give host:port[,host:port]");
  if (options.group.empty()) return Status::InvalidArgument("--group is empty; name the consumer group");
  if (options.max_held_per_partition < 2) {
    return Status::InvalidArgument("max held per partition must be at least 2");
  }
  Result<Levels> levels = Levels::Parse(options.levels, options.prefix, options.topics_per_level);
  if (!levels.ok()) return levels.status();
  auto impl = std::make_unique<Impl>(std::move(options), *std::move(levels));
  DELAYQ_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Forwarder>(new Forwarder(std::move(impl)));
}

Status Forwarder::Run() { return impl_->Run(); }
void Forwarder::Stop() { impl_->Stop(); }
ForwarderStats Forwarder::Stats() const { return impl_->metrics().Snapshot(); }
std::string Forwarder::RenderMetrics() const { return impl_->metrics().Render(); }

}  // namespace delayq::kafka
