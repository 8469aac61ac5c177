// The Redis store's lifecycle and how it runs scripts (redis_queue.h has the overview).
#include "store/redis/redis_queue.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "core/errors.h"
#include "core/validate.h"
#include "store/redis/redis_common.h"
#include "store/redis/redis_meta.h"

namespace delayq::redis {

Result<std::unique_ptr<RedisQueue>> RedisQueue::Open(const RedisQueueOptions& options) {
  if (options.shards < 1 || options.shards > 256) {
    return Status::InvalidArgument(fmt::format("shards is {}; it must be between 1 and 256", options.shards));
  }
  DELAYQ_RETURN_IF_ERROR(ValidateConfig(options.default_queue_config));
  auto url = RedisUrl::Parse(options.url);
  if (!url.ok()) return url.status();
  if (url->auth.password.empty()) url->auth.password = options.password;
  if (options.command_timeout_ms < 1) {
    return Status::InvalidArgument(
        fmt::format("command_timeout_ms is {}; it must be at least 1", options.command_timeout_ms));
  }
  auto client = RedisClient::Connect(*url, options.command_timeout_ms);
  if (!client.ok()) return client.status();
  RedisQueueOptions o = options;
  if (o.consumer.empty()) {
    char host[256] = "delayq";
    gethostname(host, sizeof(host) - 1);
    o.consumer = fmt::format("{}:{}", host, ::getpid());
  }
  auto q = std::unique_ptr<RedisQueue>(new RedisQueue(std::move(o), std::move(*client)));
  DELAYQ_RETURN_IF_ERROR(q->CheckDataFormat());
  DELAYQ_RETURN_IF_ERROR(q->LoadReceiptSecret());
  q->Start();
  return q;
}

RedisQueue::RedisQueue(RedisQueueOptions options, std::unique_ptr<RedisClient> client)
    : options_(std::move(options)),
      client_(std::move(client)),
      outcomes_(
          {[this](std::string_view queue, const JobRef& ref) { return Get(queue, ref); },
           [this](std::string_view queue, std::string_view id, int64_t wait_ms) { return Watch(queue, id, wait_ms); }}),
      rng_(std::random_device{}()),
      delivery_first_(std::chrono::microseconds(options_.delivery_first_max_wait_us)) {}

Result<std::unique_ptr<ScheduledRedisQueue>> ScheduledRedisQueue::Open(const RedisQueueOptions& options,
                                                                       std::shared_ptr<Clock> clock) {
  auto store = RedisQueue::Open(options);
  if (!store.ok()) return store.status();
  ScheduleStore& rows = (*store)->schedule_rows();
  return std::make_unique<ScheduledRedisQueue>(std::move(*store), rows,
                                               clock ? std::move(clock) : SystemClock::Instance(), options.schedules);
}

ScheduledRedisQueue::~ScheduledRedisQueue() { Close(); }

void ScheduledRedisQueue::Close() {
  StopSchedules();  // first: its thread calls the store
  redis().Close();
}

RedisQueue::~RedisQueue() { Close(); }

Status RedisQueue::CheckDataFormat() {
  auto set = Call(kFormatKey, {"SET", kFormatKey, std::to_string(kMetaFormat), "NX"});
  if (!set.ok()) return set.status();
  auto v = Call(kFormatKey, {"GET", kFormatKey});
  if (!v.ok()) return v.status();
  if (v->AsInt() > kMetaFormat) {
    return Status::Unavailable(
        fmt::format("the Redis at {} holds delayq data of format {} ({}), newer than this delayq reads ({}); run the "
                    "delayq release that wrote it, or a later one",
                    RedisUrl::Redacted(options_.url), v->AsInt(), kFormatKey, kMetaFormat));
  }
  if (v->AsInt() < kMetaFormat) {  // this release may write the newer format: older ones now refuse to open
    auto raised = Call(kFormatKey, {"SET", kFormatKey, std::to_string(kMetaFormat)});
    if (!raised.ok()) return raised.status();
    // Older servers already running do not look again, and their scripts can strand jobs of the
    // new format before they fail on them (docs/operations.md, "Upgrading to format 4").
    spdlog::warn(
        "raised the data format of the Redis at {} from {} to {} ({}): stop every older delayq server that shares "
        "it now; one still running can leave ready jobs undelivered",
        RedisUrl::Redacted(options_.url), v->AsInt(), kMetaFormat, kFormatKey);
  }
  return Status::Ok();
}

Status RedisQueue::LoadReceiptSecret() {
  static const std::string kKey = "dq:receipt-secret";
  auto set = Call(kKey, {"SET", kKey, ReceiptSigner::NewSecret(), "NX"});
  if (!set.ok()) return set.status();
  auto v = Call(kKey, {"GET", kKey});
  if (!v.ok()) return v.status();
  if (v->str.size() != ReceiptSigner::kSecretBytes) {
    return Status::Internal(fmt::format("{} in Redis holds {} bytes, not {}; delete it and restart", kKey,
                                        v->str.size(), ReceiptSigner::kSecretBytes));
  }
  std::lock_guard lock(mu_);
  signer_ = std::make_shared<const ReceiptSigner>(v->str);
  return Status::Ok();
}

std::shared_ptr<const ReceiptSigner> RedisQueue::Signer() {
  std::lock_guard lock(mu_);
  return signer_;
}

void RedisQueue::Start() {
  scheduler_ = std::thread([this] { SchedulerLoop(); });
  subscriber_ = std::thread([this] { SubscriberLoop(); });
}

void RedisQueue::Close() {
  outcomes_.Close();  // first: its thread reads jobs
  std::vector<ReserveCallback> pending;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (auto& [h, w] : waiters_) pending.push_back(std::move(w.done));
    waiters_.clear();
    if (subscription_ != nullptr) subscription_->Interrupt();
    cv_.notify_all();
  }
  for (auto& done : pending) done(std::vector<Delivery>{});
  if (scheduler_.joinable()) scheduler_.join();
  if (subscriber_.joinable()) subscriber_.join();
}

Result<Value> RedisQueue::Run(const Script& script, const std::string& queue, int shard, int shards,
                              const std::vector<std::string>& args, bool confirm) {
  const std::vector<std::string> keys = ShardKeys(queue, shard, shards);
  auto v = confirm ? client_->Eval(script, keys, args, options_.wait_replicas, options_.wait_timeout_ms)
                   : client_->Eval(script, keys, args);
  Observe(v.ok() ? Status::Ok() : v.status());
  return v;
}

std::vector<Result<Value>> RedisQueue::RunAll(const Script& script, const QueueView& q,
                                              const std::vector<std::pair<int, std::vector<std::string>>>& shard_args,
                                              bool confirm) {
  std::vector<RedisClient::EvalCall> calls;
  calls.reserve(shard_args.size());
  for (const auto& [shard, args] : shard_args) calls.push_back({ShardKeys(q.name, shard, q.shards), args});
  auto out = confirm ? client_->EvalAll(script, calls, options_.wait_replicas, options_.wait_timeout_ms)
                     : client_->EvalAll(script, calls);
  // One observation for the whole: the first part Redis could not serve, else ok (one per
  // part made health flip between the two within one call).
  auto down = std::find_if(out.begin(), out.end(), [](const auto& v) { return !v.ok(); });
  Observe(down == out.end() ? Status::Ok() : down->status());
  return out;
}

Result<Value> RedisQueue::Call(std::string_view route_key, const std::vector<std::string>& argv) {
  auto v = client_->Call(route_key, argv);
  Observe(v.ok() ? Status::Ok() : v.status());
  return v;
}

Result<Value> RedisQueue::Write(std::string_view route_key, const std::vector<std::string>& argv) {
  auto v = client_->Call(route_key, argv, options_.wait_replicas, options_.wait_timeout_ms);
  Observe(v.ok() ? Status::Ok() : v.status());
  return v;
}

Result<Value> RedisQueue::Eval(const Script& script, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args, bool confirm) {
  auto v = confirm ? client_->Eval(script, keys, args, options_.wait_replicas, options_.wait_timeout_ms)
                   : client_->Eval(script, keys, args);
  Observe(v.ok() ? Status::Ok() : v.status());
  return v;
}

void RedisQueue::Observe(const Status& s) {
  std::lock_guard lock(mu_);
  if (s.code() == Code::kUnavailable) {
    if (health_.ok()) spdlog::warn("Redis cannot serve: {}", s.message());
    health_ = s;
  } else if (!health_.ok()) {
    spdlog::info("Redis serves again");
    health_ = Status::Ok();
  }
}

Status RedisQueue::Health() {
  std::lock_guard lock(mu_);
  if (closed_) return errors::StoreClosed();
  return health_;
}

}  // namespace delayq::redis
