#include "store/redis/redis_queue.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "core/errors.h"
#include "core/histogram.h"
#include "core/receipt.h"
#include "core/receipt_signer.h"
#include "core/record.h"
#include "core/validate.h"
#include "store/redis/scripts.h"

namespace delayq::redis {
namespace {

constexpr const char* kRegistry = "dq:queues";
constexpr int64_t kRegistryRefreshMs = 10'000;
constexpr size_t kChunk = 1000;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Tag(const std::string& queue, int shard, int shards) {
  return shards > 1 ? queue + "#" + std::to_string(shard) : queue;
}
std::string HomeConfigKey(const std::string& queue) { return "dq:{" + queue + "}:config"; }


// Redis answered a script with an error reply: a bug or a Redis-side limit.
Status ScriptError(const Value& v) {
  if (v.str.find("OOM") != std::string::npos) {
    return Status::ResourceExhausted("Redis is out of memory (maxmemory reached): " + v.str);
  }
  return Status::Internal("Redis script error: " + v.str);
}

// Lateness from the buckets the scripts keep (edges in LatenessSummary::kLatenessBucketsMs).
void AddLateness(const Value& flat, std::vector<uint64_t>* buckets, uint64_t* count, int64_t* sum_us,
                 int64_t* max_us) {
  for (size_t i = 0; i + 1 < flat.array.size(); i += 2) {
    const std::string& k = flat.array[i].str;
    const int64_t v = flat.array[i + 1].AsInt();
    if (k == "count") *count += static_cast<uint64_t>(v);
    else if (k == "sum_us") *sum_us += v;
    else if (k == "max_us") *max_us = std::max(*max_us, v);
    else if (k.size() > 1 && k[0] == 'b') {
      size_t b = static_cast<size_t>(std::atoi(k.c_str() + 1));
      if (b >= 1 && b <= buckets->size()) (*buckets)[b - 1] += static_cast<uint64_t>(v);
    }
  }
}

LatenessSummary Summarize(const std::vector<uint64_t>& per_bucket, uint64_t count, int64_t sum_us, int64_t max_us) {
  LatenessSummary s;
  constexpr size_t kEdges = std::size(LatenessSummary::kLatenessBucketsMs);
  s.count = count;
  s.sum_ms = static_cast<double>(sum_us) / 1000.0;
  s.max_ms = static_cast<double>(max_us) / 1000.0;
  uint64_t running = 0;
  for (size_t i = 0; i < kEdges; ++i) {
    running += per_bucket[i];
    s.cumulative.push_back(running);
  }
  auto percentile = [&](double q) {
    if (count == 0) return 0.0;
    const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count)));
    for (size_t i = 0; i < kEdges; ++i) {
      if (s.cumulative[i] >= rank) return std::min(LatenessSummary::kLatenessBucketsMs[i], s.max_ms);
    }
    return s.max_ms;
  };
  s.p50_ms = percentile(0.5);
  s.p90_ms = percentile(0.9);
  s.p99_ms = percentile(0.99);
  s.p999_ms = percentile(0.999);
  return s;
}

// meta: state|due|base|attempt|max|delivery|sid|key_indexed|key
struct Meta {
  char state = 's';
  int64_t due = 0;
  int32_t attempt = 0, max = 0;
  std::string key;
};
bool ParseMeta(const std::string& m, Meta* out) {
  std::vector<std::string> f;
  size_t pos = 0;
  for (int i = 0; i < 8; ++i) {
    size_t bar = m.find('|', pos);
    if (bar == std::string::npos) return false;
    f.push_back(m.substr(pos, bar - pos));
    pos = bar + 1;
  }
  out->state = f[0].empty() ? 's' : f[0][0];
  out->due = std::atoll(f[1].c_str());
  out->attempt = std::atoi(f[3].c_str());
  out->max = std::atoi(f[4].c_str());
  out->key = m.substr(pos);
  return true;
}

}  // namespace

Result<std::unique_ptr<RedisQueue>> RedisQueue::Open(const RedisQueueOptions& options) {
  if (options.shards < 1 || options.shards > 256) {
    return Status::InvalidArgument(fmt::format("shards is {}; it must be between 1 and 256", options.shards));
  }
  DELAYQ_RETURN_IF_ERROR(ValidateConfig(options.default_queue_config));
  auto url = RedisUrl::Parse(options.url);
  if (!url.ok()) return url.status();
  auto client = RedisClient::Connect(*url);
  if (!client.ok()) return client.status();
  RedisQueueOptions o = options;
  if (o.consumer.empty()) {
    char host[256] = "delayq";
    gethostname(host, sizeof(host) - 1);
    o.consumer = fmt::format("{}:{}", host, ::getpid());
  }
  auto q = std::unique_ptr<RedisQueue>(new RedisQueue(std::move(o), std::move(*client)));
  DELAYQ_RETURN_IF_ERROR(q->LoadReceiptSecret());
  q->Start();
  return q;
}

RedisQueue::RedisQueue(RedisQueueOptions options, std::unique_ptr<RedisClient> client)
    : options_(std::move(options)), client_(std::move(client)), rng_(std::random_device{}()) {}

RedisQueue::~RedisQueue() { Close(); }

Status RedisQueue::LoadReceiptSecret() {
  static const std::string kKey = "dq:receipt-secret";
  auto set = client_->Call(kKey, {"SET", kKey, ReceiptSigner::NewSecret(), "NX"});
  if (!set.ok()) return set.status();
  auto v = client_->Call(kKey, {"GET", kKey});
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
  std::vector<ReserveCallback> pending;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (auto& [h, w] : waiters_) pending.push_back(std::move(w.done));
    waiters_.clear();
    cv_.notify_all();
  }
  for (auto& done : pending) done(std::vector<Delivery>{});
  if (scheduler_.joinable()) scheduler_.join();
  if (subscriber_.joinable()) subscriber_.join();
}

std::vector<std::string> RedisQueue::Keys(const std::string& queue, int shard) const {
  int shards = 1;
  {
    auto it = queues_.find(queue);
    if (it != queues_.end()) shards = it->second.shards;
  }
  const std::string p = "dq:{" + Tag(queue, shard, shards) + "}:";
  return {p + "due",      p + "jobs",     p + "meta",   p + "ready",    p + "leases", p + "dead",
          p + "keys",     p + "errors",   p + "counters", p + "lateness", p + "config", p + "wake"};
}

Result<Value> RedisQueue::Run(const Script& script, const std::string& queue, int shard,
                              const std::vector<std::string>& args, bool confirm) {
  std::vector<std::string> keys;
  {
    std::lock_guard lock(mu_);
    keys = Keys(queue, shard);
  }
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

Result<RedisQueue::QueueInfo*> RedisQueue::Info(std::string_view queue_view, bool create) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  {
    std::lock_guard lock(mu_);
    if (closed_) return errors::StoreClosed();
    auto it = queues_.find(queue);
    if (it != queues_.end() && it->second.config_read_at >= 0 && SteadyMs() - it->second.config_read_at < 1000) {
      return &it->second;
    }
  }
  const std::string home = HomeConfigKey(queue);
  if (create) {
    // Registered first: a queue over --max-queues is taken out again before it holds anything
    // (servers racing at the limit may pass it by one each).
    auto reg = client_->Call(kRegistry, {"SADD", kRegistry, queue});
    if (!reg.ok()) return reg.status();
    if (reg->AsInt() == 1) {
      auto count = client_->Call(kRegistry, {"SCARD", kRegistry});
      if (!count.ok()) return count.status();
      if (count->AsInt() > static_cast<int64_t>(options_.max_queues)) {
        (void)client_->Call(kRegistry, {"SREM", kRegistry, queue});
        return errors::QueueLimit(queue, static_cast<size_t>(count->AsInt()), options_.max_queues);
      }
    }
    auto r = client_->Pipeline(home, {{"HSETNX", home, "shards", std::to_string(options_.shards)}});
    if (!r.ok()) return r.status();
  }
  // A SetConfig on another thread between our HGETALL and our store would be undone by what we
  // read (the scheduler reads configs too): read again when a write happened meanwhile.
  for (int attempt = 0;; ++attempt) {
    uint64_t writes_before;
    {
      std::lock_guard lock(mu_);
      writes_before = config_writes_;
    }
    auto info = ReadConfig(queue, home, create, attempt < 3 ? std::optional(writes_before) : std::nullopt);
    if (!info.ok() || *info != nullptr) return info;
  }
}

// Reads the queue's config hash and caches it. With `writes_before`, a config write since then
// makes it cache nothing and answer nullptr (the caller reads again). Takes mu_ itself.
Result<RedisQueue::QueueInfo*> RedisQueue::ReadConfig(const std::string& queue, const std::string& home, bool create,
                                                      std::optional<uint64_t> writes_before) {
  auto all = client_->Call(home, {"HGETALL", home});
  if (!all.ok()) return all.status();
  if (all->is_error()) return ScriptError(*all);
  if (all->array.empty() && !create) return errors::UnknownQueue(queue);
  QueueConfig c = options_.default_queue_config;
  int shards = 1;
  for (size_t i = 0; i + 1 < all->array.size(); i += 2) {
    const std::string& k = all->array[i].str;
    const std::string& v = all->array[i + 1].str;
    if (k == "shards") shards = std::clamp(std::atoi(v.c_str()), 1, 256);
    else if (k == "max_attempts") c.max_attempts = std::atoi(v.c_str());
    else if (k == "base_ms") c.backoff.base_ms = std::atoll(v.c_str());
    else if (k == "factor") c.backoff.factor = std::atof(v.c_str());
    else if (k == "max_ms") c.backoff.max_ms = std::atoll(v.c_str());
    else if (k == "jitter") c.backoff.jitter = std::atof(v.c_str());
    else if (k == "lease_ms") c.lease_ms = std::atoll(v.c_str());
    else if (k == "max_payload") c.max_payload = std::atoll(v.c_str());
    else if (k == "dead_retention_ms") c.dead_retention_ms = std::atoll(v.c_str());
    else if (k == "max_delay_ms") c.max_delay_ms = std::atoll(v.c_str());
  }
  if (options_.after_config_read_for_test) options_.after_config_read_for_test(queue);
  std::lock_guard lock(mu_);
  if (writes_before && config_writes_ != *writes_before) return nullptr;
  QueueInfo& info = queues_[queue];
  if (info.name.empty()) {
    info.name = queue;
    info.check = true;
    cv_.notify_all();
  }
  info.shards = shards;
  info.config = c;
  info.config_read_at = SteadyMs();
  info.next_due.resize(static_cast<size_t>(shards), -1);
  info.next_lease.resize(static_cast<size_t>(shards), -1);
  info.next_dead.resize(static_cast<size_t>(shards), -1);
  return &info;
}

Status RedisQueue::WriteConfig(const std::string& queue, const QueueConfig& c, int shards) {
  const std::string home = HomeConfigKey(queue);
  auto r = client_->Call(home, {"HSET", home, "max_attempts", std::to_string(c.max_attempts), "base_ms",
                                std::to_string(c.backoff.base_ms), "factor", fmt::format("{}", c.backoff.factor),
                                "max_ms", std::to_string(c.backoff.max_ms), "jitter",
                                fmt::format("{}", c.backoff.jitter), "lease_ms", std::to_string(c.lease_ms),
                                "max_payload", std::to_string(c.max_payload), "dead_retention_ms",
                                std::to_string(c.dead_retention_ms), "max_delay_ms", std::to_string(c.max_delay_ms)});
  if (!r.ok()) return r.status();
  if (r->is_error()) return ScriptError(*r);
  (void)shards;
  std::lock_guard lock(mu_);
  ++config_writes_;
  auto it = queues_.find(queue);
  if (it != queues_.end()) {
    it->second.config = c;
    it->second.config_read_at = SteadyMs();
  }
  return Status::Ok();
}

// A receipt the scripts refused: "N" (no such job) or "E:<state>:<attempt>:<max>" (its delivery
// is over), told as the embedded store tells it (LocateReceiptLocked): went dead; delivered
// again (reserved now, with another token); or nacked, rescheduled or replaced since.
Status RedisQueue::DeliveryError(const std::string& code, const Ulid& id) {
  const std::string sid = id.ToString();
  if (code.rfind("E:", 0) != 0) return errors::DeliveryJobGone(sid);
  const char state = code.size() > 2 ? code[2] : '?';
  int attempt = 0, max = 0;
  std::sscanf(code.c_str() + std::min<size_t>(code.size(), 4), "%d:%d", &attempt, &max);
  if (state == 'd') return errors::DeliveryWentDead(sid, attempt, max);
  if (state == 'r') return errors::DeliveredAgain(sid, attempt);
  return errors::DeliveryOver(sid);
}

// ---------------------------------------------------------------------------------------------
// Jobs

Result<EnqueueResult> RedisQueue::Enqueue(std::string_view queue, const EnqueueRequest& request) {
  auto r = EnqueueBatch(queue, std::span(&request, 1));
  if (!r.ok()) {
    Status s = r.status();
    const std::string prefix = "jobs[0].";
    std::string msg = s.message();
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    return Status(s.code(), msg);
  }
  return std::move(r->front());
}

Result<std::vector<EnqueueResult>> RedisQueue::EnqueueBatch(std::string_view queue_view,
                                                            std::span<const EnqueueRequest> requests) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  DELAYQ_RETURN_IF_ERROR(ValidateBatchSize(requests.size()));
  const std::string queue(queue_view);
  auto info = Info(queue, true);
  if (!info.ok()) return info.status();
  QueueConfig config;
  int shards;
  {
    std::lock_guard lock(mu_);
    config = (*info)->config;
    shards = (*info)->shards;
  }
  const bool batch = requests.size() > 1;
  auto prefix = [batch](size_t i) { return batch ? fmt::format("jobs[{}].", i) : std::string("jobs[0]."); };
  for (size_t i = 0; i < requests.size(); ++i) {
    DELAYQ_RETURN_IF_ERROR(ValidateEnqueue(requests[i], config, prefix(i)));
    // What needs no clock here; a deliver_at is judged by the script, on Redis' clock.
    DELAYQ_RETURN_IF_ERROR(ValidateWhen(requests[i].when, config, prefix(i)));
  }
  // Jobs go to a shard by key (so a key is unique per queue) or round-robin.
  std::vector<std::vector<size_t>> by_shard(static_cast<size_t>(shards));
  std::vector<Ulid> ids(requests.size());
  const int64_t now = WallMs();
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < requests.size(); ++i) {
      int shard;
      if (!requests[i].key.empty()) {
        shard = static_cast<int>(std::hash<std::string>()(requests[i].key) % static_cast<size_t>(shards));
        do {
          ids[i] = ids_.Next(now);
        } while (ids[i].bytes[15] % shards != shard);
      } else {
        ids[i] = ids_.Next(now);
        shard = ids[i].bytes[15] % shards;
      }
      by_shard[static_cast<size_t>(shard)].push_back(i);
    }
  }
  std::vector<EnqueueResult> results(requests.size());
  bool any_now = false;
  for (int shard = 0; shard < shards; ++shard) {
    const auto& members = by_shard[static_cast<size_t>(shard)];
    if (members.empty()) continue;
    std::vector<std::string> args = {std::to_string(config.max_delay_ms), std::to_string(members.size())};
    for (size_t i : members) {
      const EnqueueRequest& r = requests[i];
      JobRecord record;
      record.queue = queue;
      record.key = r.key;
      record.created_at_ms = now;
      record.max_attempts = r.max_attempts.value_or(config.max_attempts);
      record.headers = r.headers;
      record.payload = r.payload;
      record.binary = r.binary;
      args.push_back(ids[i].ToString());
      args.push_back(EncodeJobRecord(record));
      if (r.when.delay_ms) {
        args.push_back("d");
        args.push_back(std::to_string(*r.when.delay_ms));
      } else if (r.when.deliver_at_ms) {
        args.push_back("a");
        args.push_back(std::to_string(*r.when.deliver_at_ms));
      } else {
        args.push_back("n");
        args.push_back("0");
        any_now = true;
      }
      args.push_back(r.max_attempts ? std::to_string(*r.max_attempts) : std::to_string(config.max_attempts));
      args.push_back(r.key);
      args.push_back(r.replace ? "1" : "0");
    }
    auto v = Run(kEnqueueScript, queue, shard, args, true);
    if (!v.ok()) return v.status();
    if (v->is_error()) {
      // "delayq:TOO_FAR:<i>:<now>" / "delayq:CONFLICT:<i>:<id>" (i within this shard's list)
      const std::string& e = v->str;
      auto p1 = e.find("delayq:");
      if (p1 != std::string::npos) {
        std::string rest = e.substr(p1 + 7);
        auto c1 = rest.find(':'), c2 = rest.find(':', c1 + 1);
        const std::string kind = rest.substr(0, c1);
        const size_t local = static_cast<size_t>(std::atoi(rest.c_str() + c1 + 1));
        const size_t index = local < members.size() ? members[local] : 0;
        const std::string detail = rest.substr(c2 + 1);
        if (kind == "CONFLICT") return errors::ReservedCannotReplace(prefix(index), requests[index].key, detail);
        if (kind == "TOO_FAR") {  // the refusal ResolveDue gives, at Redis' now
          auto due = ResolveDue(requests[index].when, std::atoll(detail.c_str()), config, prefix(index));
          if (!due.ok()) return due.status();
        }
        return ScriptError(*v);
      }
      return ScriptError(*v);
    }
    for (size_t j = 0; j < members.size() && j < v->array.size(); ++j) {
      const auto& row = v->array[j].array;
      EnqueueResult& out = results[members[j]];
      out.id = row[0].str;
      out.due_at_ms = row[1].AsInt();
      out.duplicate = row[2].AsInt() == 1;
      out.replaced = row[3].AsInt() == 1;
    }
  }
  if (any_now) {
    std::lock_guard lock(mu_);
    ready_notices_.insert(queue);
    Poke();
  }
  return results;
}

Result<Job> RedisQueue::ToJob(const std::string& queue, const Value& v) {
  if (v.is_nil() || v.array.size() < 7) return Status::NotFound("no such job");
  Meta meta;
  if (!ParseMeta(v.array[1].str, &meta)) return Status::Corruption("a job's meta record in Redis is malformed");
  JobRecord record;
  if (!v.array[2].str.empty()) DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(v.array[2].str, &record));
  Job j;
  j.id = v.array[0].str;
  j.queue = queue;
  j.due_at_ms = meta.due;
  j.attempt = meta.attempt;
  j.max_attempts = meta.max;
  j.key = meta.key;
  j.payload = std::move(record.payload);
  j.binary = record.binary;
  j.headers = std::move(record.headers);
  j.created_at_ms = record.created_at_ms;
  j.last_error = v.array[3].str;
  const int64_t now = v.array[6].AsInt();
  switch (meta.state) {
    case 'q': j.state = JobState::kReady; break;
    case 'r': {
      j.lease_deadline_ms = v.array[4].AsInt();
      j.state = j.lease_deadline_ms > now ? JobState::kReserved : JobState::kReady;
      break;
    }
    case 'd':
      j.state = JobState::kDead;
      j.dead_at_ms = v.array[5].AsInt();
      break;
    default: j.state = JobState::kScheduled;
  }
  return j;
}

Result<Job> RedisQueue::Get(std::string_view queue_view, const JobRef& ref) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const std::string queue(queue_view);
  int shard = 0;
  if (!ref.id.empty()) {
    auto id = Ulid::Parse(ref.id);
    if (!id) return errors::NotAJobId("id", ref.id);
    std::lock_guard lock(mu_);
    shard = ShardOf(**info, *id);
  } else {
    DELAYQ_RETURN_IF_ERROR(ValidateKey(ref.key));
    std::lock_guard lock(mu_);
    shard = static_cast<int>(std::hash<std::string>()(ref.key) % static_cast<size_t>((*info)->shards));
  }
  auto v = Run(kGetScript, queue, shard, {ref.id, ref.key});
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->is_nil()) return ref.id.empty() ? errors::NoJobWithKey(queue, ref.key) : errors::NoSuchJob(queue, ref.id);
  return ToJob(queue, *v);
}

Status RedisQueue::Cancel(std::string_view queue, const JobRef& ref) {
  auto job = Get(queue, ref);  // resolves the shard and gives the clear errors
  if (!job.ok()) return job.status();
  auto info = Info(queue, false);
  if (!info.ok()) return info.status();
  int shard;
  {
    std::lock_guard lock(mu_);
    shard = ShardOf(**info, *Ulid::Parse(job->id));
  }
  auto v = Run(kCancelScript, std::string(queue), shard, {job->id, ""}, true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->str == "N") return errors::NoSuchJob(queue, job->id);
  if (v->str == "C") return errors::ReservedCannotCancel(job->id);
  return Status::Ok();
}

Result<Job> RedisQueue::Reschedule(std::string_view queue, const JobRef& ref, const When& when) {
  auto job = Get(queue, ref);
  if (!job.ok()) return job.status();
  auto info = Info(queue, false);
  if (!info.ok()) return info.status();
  QueueConfig config;
  int shard;
  {
    std::lock_guard lock(mu_);
    config = (*info)->config;
    shard = ShardOf(**info, *Ulid::Parse(job->id));
  }
  DELAYQ_RETURN_IF_ERROR(ValidateWhen(when, config));  // a deliver_at: the script, on Redis' clock
  std::string mode = "d", value = "0";
  if (when.delay_ms) value = std::to_string(*when.delay_ms);
  if (when.deliver_at_ms) {
    mode = "a";
    value = std::to_string(*when.deliver_at_ms);
  }
  auto v = Run(kRescheduleScript, std::string(queue), shard,
               {job->id, "", mode, value, std::to_string(config.max_delay_ms)}, true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->type != Value::kArray) {
    if (v->str == "N") return errors::NoSuchJob(queue, job->id);
    if (v->str == "C") return errors::ReservedCannotReschedule(job->id);
    if (v->str == "D") return errors::DeadCannotReschedule(job->id);
    if (v->str.rfind("I:", 0) == 0) {  // too far ahead: the refusal ResolveDue gives, at Redis' now
      auto due = ResolveDue(when, std::atoll(v->str.c_str() + 2), config);
      if (!due.ok()) return due.status();
    }
    return Status::Internal("the reschedule script answered " + v->str.substr(0, 40));
  }
  {
    std::lock_guard lock(mu_);
    ready_notices_.insert(std::string(queue));
    Poke();
  }
  return Get(queue, JobRef::ById(job->id));
}

// ---------------------------------------------------------------------------------------------
// Deliveries

Result<std::vector<Delivery>> RedisQueue::ReserveNow(const std::string& queue, const ReserveRequest& request) {
  auto info = Info(queue, false);  // a reserve creates no queue
  if (!info.ok() && info.status().code() == Code::kNotFound) return std::vector<Delivery>{};
  if (!info.ok()) return info.status();
  int64_t lease;
  int shards;
  int start;  // the shard to try first (rng_ is shared: under mu_, found by ThreadSanitizer)
  {
    std::lock_guard lock(mu_);
    lease = request.lease_ms.value_or((*info)->config.lease_ms);
    shards = (*info)->shards;
    start = shards > 1 ? static_cast<int>(rng_() % static_cast<uint64_t>(shards)) : 0;
  }
  const auto signer = Signer();
  std::vector<Delivery> out;
  int64_t bytes = 0;  // of the stored records answered, against request.max_bytes
  for (int k = 0; k < shards && static_cast<int32_t>(out.size()) < request.max &&
                  (out.empty() || bytes < request.max_bytes);
       ++k) {
    const int shard = (start + k) % shards;
    const int32_t want = request.max - static_cast<int32_t>(out.size());
    std::vector<std::string> args = {options_.consumer, std::to_string(want), std::to_string(lease),
                                     std::to_string(kClaimIdleMs), std::to_string(request.max_bytes - bytes),
                                     out.empty() ? "1" : "0"};
    // Delivery tokens from the OS CSPRNG (128 bits): the scripts store them as given, and a
    // receipt acts only when its token equals the stored one.
    for (int32_t i = 0; i < want; ++i) args.push_back(DeliveryToken::Random().Hex());
    auto v = Run(kReserveScript, queue, shard, args, true);
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    int64_t deadline = -1;
    for (const auto& row : v->array) {
      const auto& a = row.array;
      if (a.size() < 8) continue;
      JobRecord record;
      bytes += static_cast<int64_t>(a[1].str.size());
      if (!a[1].str.empty()) DELAYQ_RETURN_IF_ERROR(DecodeJobRecord(a[1].str, &record));
      Delivery d;
      d.id = a[0].str;
      auto receipt = Receipt::Parse(a[0].str + "." + a[3].str);
      if (!receipt.ok()) return Status::Internal("the reserve script answered a malformed delivery: " + receipt.status().message());
      d.receipt = signer->Issue(queue, *receipt);
      d.payload = std::move(record.payload);
      d.binary = record.binary;
      d.headers = std::move(record.headers);
      d.attempt = static_cast<int32_t>(a[2].AsInt());
      d.due_at_ms = a[4].AsInt();
      d.lease_deadline_ms = a[5].AsInt();
      deadline = d.lease_deadline_ms;
      d.max_attempts = static_cast<int32_t>(a[6].AsInt());
      d.key = a[7].str;
      out.push_back(std::move(d));
    }
    if (deadline >= 0) {  // a lease deadline for the scheduler to watch (the same for the batch)
      std::lock_guard lock(mu_);
      auto& next = (*info)->next_lease;
      if (static_cast<size_t>(shard) < next.size() && (next[shard] < 0 || deadline < next[shard])) {
        next[shard] = deadline;
        Poke();
      }
    }
  }
  return out;
}

Result<std::vector<Delivery>> RedisQueue::Reserve(std::string_view queue, const ReserveRequest& request) {
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto future = promise->get_future();
  ReserveAsync(queue, request, [promise](Result<std::vector<Delivery>> r) { promise->set_value(std::move(r)); });
  return future.get();
}

uint64_t RedisQueue::ReserveAsync(std::string_view queue_view, const ReserveRequest& request, ReserveCallback done) {
  Status valid = ValidateQueueName(queue_view);
  if (valid.ok()) valid = ValidateReserve(request);
  if (!valid.ok()) {
    done(valid);
    return 0;
  }
  const std::string queue(queue_view);
  auto now = ReserveNow(queue, request);
  if (!now.ok() || !now->empty() || request.wait_ms == 0) {
    done(std::move(now));
    return 0;
  }
  uint64_t handle;
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      handle = 0;
    } else {
      handle = next_waiter_++;
      waiters_.emplace(handle, Waiter{queue, request, SteadyMs() + request.wait_ms, std::move(done)});
      queues_[queue].waiters.push_back(handle);
      ready_notices_.insert(queue);  // a job may have become ready since ReserveNow looked
      Poke();
      return handle;
    }
  }
  done(std::vector<Delivery>{});
  return 0;
}

void RedisQueue::CancelReserve(uint64_t handle) {
  ReserveCallback done;
  {
    std::lock_guard lock(mu_);
    auto it = waiters_.find(handle);
    if (it == waiters_.end()) {
      // Being served right now (ServeWaiters holds it while a reserve runs): answered there.
      if (serving_.contains(handle)) cancelled_while_serving_.insert(handle);
      return;
    }
    done = std::move(it->second.done);
    const std::string queue = it->second.queue;
    waiters_.erase(it);
    DropIfUnusedLocked(queue);
  }
  done(std::vector<Delivery>{});
}

void RedisQueue::DropIfUnusedLocked(const std::string& queue) {
  auto q = queues_.find(queue);
  if (q == queues_.end() || q->second.config_read_at >= 0) return;
  for (uint64_t handle : q->second.waiters) {
    if (waiters_.contains(handle)) return;
  }
  queues_.erase(q);
}

Status RedisQueue::Ack(std::string_view queue, std::string_view receipt) {
  std::string r(receipt);
  return AckBatch(queue, std::span(&r, 1)).front();
}

std::vector<Status> RedisQueue::AckBatch(std::string_view queue_view, std::span<const std::string> receipts) {
  std::vector<Status> out(receipts.size());
  auto info = Info(queue_view, false);
  if (!info.ok()) {
    std::fill(out.begin(), out.end(), info.status());
    return out;
  }
  const std::string queue(queue_view);
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  std::vector<std::vector<size_t>> by_shard(static_cast<size_t>(shards));
  std::vector<Receipt> parsed(receipts.size());
  // A receipt given twice is acked once, and every copy answers what the first did.
  const std::vector<size_t> first = FirstOccurrences(receipts);
  const auto signer = Signer();
  for (size_t i = 0; i < receipts.size(); ++i) {
    if (first[i] != i) continue;
    auto r = signer->Open(queue, receipts[i]);
    if (!r.ok()) {
      out[i] = r.status();
      continue;
    }
    parsed[i] = *r;
    by_shard[static_cast<size_t>(parsed[i].id.bytes[15] % shards)].push_back(i);
  }
  for (int shard = 0; shard < shards; ++shard) {
    const auto& members = by_shard[static_cast<size_t>(shard)];
    if (members.empty()) continue;
    std::vector<std::string> args = {std::to_string(members.size())};
    for (size_t i : members) {
      args.push_back(parsed[i].id.ToString());
      args.push_back(parsed[i].token.Hex());
    }
    auto v = Run(kAckScript, queue, shard, args, true);
    for (size_t j = 0; j < members.size(); ++j) {
      const size_t i = members[j];
      if (!v.ok()) {
        out[i] = v.status();
      } else if (v->is_error()) {
        out[i] = ScriptError(*v);
      } else if (j < v->array.size() && v->array[j].str != "O") {
        out[i] = DeliveryError(v->array[j].str, parsed[i].id);
      }
    }
  }
  for (size_t i = 0; i < receipts.size(); ++i) out[i] = out[first[i]];
  return out;
}

Result<NackResult> RedisQueue::Nack(std::string_view queue_view, const NackRequest& request) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  auto receipt = Signer()->Open(queue_view, request.receipt);
  if (!receipt.ok()) return receipt.status();
  QueueConfig config;
  int shard;
  double unit;
  {
    std::lock_guard lock(mu_);
    config = (*info)->config;
    shard = ShardOf(**info, receipt->id);
    unit = std::uniform_real_distribution<double>(-1.0, 1.0)(rng_);
  }
  DELAYQ_RETURN_IF_ERROR(ValidateNack(request, config));
  const std::string error = NackErrorText(request);
  auto v = Run(kNackScript, std::string(queue_view), shard,
               {receipt->id.ToString(), receipt->token.Hex(), std::to_string(request.retry_in_ms.value_or(-1)),
                error, request.dead ? "1" : "0", std::to_string(config.backoff.base_ms),
                fmt::format("{}", config.backoff.factor), std::to_string(config.backoff.max_ms),
                fmt::format("{}", unit * config.backoff.jitter)}, true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->type != Value::kArray) return DeliveryError(v->str, receipt->id);
  NackResult r;
  r.state = v->array[0].str == "d" ? JobState::kDead : JobState::kScheduled;
  r.due_at_ms = v->array[1].AsInt();
  std::lock_guard lock(mu_);
  if (r.state == JobState::kDead && v->array.size() > 2) {  // the scheduler plans its retention sweep
    auto& next = (*info)->next_dead;
    const int64_t dead_at = v->array[2].AsInt();
    if (static_cast<size_t>(shard) < next.size() && (next[shard] < 0 || dead_at < next[shard])) next[shard] = dead_at;
  }
  ready_notices_.insert(std::string(queue_view));
  Poke();
  return r;
}

Result<TouchResult> RedisQueue::Touch(std::string_view queue_view, std::string_view receipt_text,
                                      std::optional<int64_t> lease_ms) {
  if (lease_ms) DELAYQ_RETURN_IF_ERROR(ValidateLeaseMs(*lease_ms));
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  auto receipt = Signer()->Open(queue_view, receipt_text);
  if (!receipt.ok()) return receipt.status();
  int64_t lease;
  int shard;
  {
    std::lock_guard lock(mu_);
    lease = lease_ms.value_or((*info)->config.lease_ms);
    shard = ShardOf(**info, receipt->id);
  }
  auto v = Run(kTouchScript, std::string(queue_view), shard,
               {receipt->id.ToString(), receipt->token.Hex(), std::to_string(lease),
                std::to_string(kClaimIdleMs), options_.consumer}, true);
  if (!v.ok()) return v.status();
  if (v->is_error()) return ScriptError(*v);
  if (v->type != Value::kInteger) return DeliveryError(v->str, receipt->id);
  return TouchResult{v->integer};
}

// ---------------------------------------------------------------------------------------------
// Dead letters

Result<std::vector<Job>> RedisQueue::ListDead(std::string_view queue_view, int32_t limit) {
  DELAYQ_RETURN_IF_ERROR(ValidateDeadListLimit(limit));
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const std::string queue(queue_view);
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  std::vector<std::pair<int64_t, std::pair<int, std::string>>> dead;  // (dead_at, (shard, id))
  for (int shard = 0; shard < shards; ++shard) {
    std::vector<std::string> keys;
    {
      std::lock_guard lock(mu_);
      keys = Keys(queue, shard);
    }
    auto v = client_->Call(keys[5], {"ZRANGE", keys[5], "0", std::to_string(limit - 1), "WITHSCORES"});
    if (!v.ok()) return v.status();
    for (size_t i = 0; i + 1 < v->array.size(); i += 2) {
      dead.push_back({v->array[i + 1].AsInt(), {shard, v->array[i].str}});
    }
  }
  std::sort(dead.begin(), dead.end());
  if (dead.size() > static_cast<size_t>(limit)) dead.resize(static_cast<size_t>(limit));
  std::vector<Job> out;
  for (const auto& [at, where] : dead) {
    auto v = Run(kGetScript, queue, where.first, {where.second, ""});
    if (!v.ok()) return v.status();
    if (v->is_nil()) continue;
    auto job = ToJob(queue, *v);
    if (job.ok()) out.push_back(std::move(*job));
  }
  return out;
}

Result<int64_t> RedisQueue::ReplayDead(std::string_view queue_view, std::span<const std::string> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!Ulid::Parse(ids[i])) return errors::NotAJobId(fmt::format("ids[{}]", i), ids[i]);
  }
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const std::string queue(queue_view);
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  int64_t replayed = 0;
  for (int shard = 0; shard < shards; ++shard) {
    if (!ids.empty()) {
      std::vector<std::string> args = {"0"};
      for (const auto& id : ids) {
        const Ulid parsed = *Ulid::Parse(id);
        if (parsed.bytes[15] % shards == shard) args.push_back(parsed.ToString());
      }
      if (args.size() == 1) continue;
      auto v = Run(kReplayScript, queue, shard, args, true);
      if (!v.ok()) return v.status();
      if (v->is_error()) return ScriptError(*v);
      replayed += v->AsInt();
      continue;
    }
    std::vector<std::string> keys;
    {
      std::lock_guard lock(mu_);
      keys = Keys(queue, shard);
    }
    auto count = client_->Call(keys[5], {"ZCARD", keys[5]});
    if (!count.ok()) return count.status();
    int64_t budget = count->AsInt();
    while (budget > 0) {
      auto v = Run(kReplayScript, queue, shard, {std::to_string(std::min<int64_t>(budget, kChunk))}, true);
      if (!v.ok()) return v.status();
      if (v->is_error()) return ScriptError(*v);
      if (v->AsInt() == 0) break;
      replayed += v->AsInt();
      budget -= v->AsInt();
    }
  }
  std::lock_guard lock(mu_);
  ready_notices_.insert(queue);
  Poke();
  return replayed;
}

Result<int64_t> RedisQueue::PurgeDead(std::string_view queue_view) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const std::string queue(queue_view);
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  int64_t purged = 0;
  for (int shard = 0; shard < shards; ++shard) {
    while (true) {
      auto v = Run(kPurgeScript, queue, shard, {std::to_string(kChunk)}, true);
      if (!v.ok()) return v.status();
      if (v->is_error()) return ScriptError(*v);
      purged += v->AsInt();
      if (v->AsInt() < static_cast<int64_t>(kChunk)) break;
    }
  }
  return purged;
}

// ---------------------------------------------------------------------------------------------
// Queues

Result<QueueStats> RedisQueue::Stats(std::string_view queue_view) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const std::string queue(queue_view);
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  QueueStats s;
  s.name = queue;
  std::vector<uint64_t> buckets(std::size(LatenessSummary::kLatenessBucketsMs) + 1, 0);
  uint64_t count = 0;
  int64_t sum_us = 0, max_us = 0;
  for (int shard = 0; shard < shards; ++shard) {
    auto v = Run(kStatsScript, queue, shard, {});
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    const auto& a = v->array;
    if (a.size() < 11) return Status::Internal("the stats script answered oddly");
    s.scheduled += a[0].AsInt();
    s.ready += a[1].AsInt();
    s.reserved += a[2].AsInt();
    s.dead += a[3].AsInt();
    s.due_next_60s += a[4].AsInt();
    if (a[5].AsInt() >= 0 && (!s.earliest_due_at_ms || a[5].AsInt() < *s.earliest_due_at_ms)) {
      s.earliest_due_at_ms = a[5].AsInt();
    }
    s.oldest_ready_ms = std::max(s.oldest_ready_ms, a[6].AsInt());
    s.paused = s.paused || a[7].AsInt() == 1;
    for (size_t i = 0; i + 1 < a[8].array.size(); i += 2) {
      const std::string& k = a[8].array[i].str;
      const auto n = static_cast<uint64_t>(a[8].array[i + 1].AsInt());
      if (k == "enqueued") s.counters.enqueued += n;
      else if (k == "delivered") s.counters.delivered += n;
      else if (k == "acked") s.counters.acked += n;
      else if (k == "nacked") s.counters.nacked += n;
      else if (k == "redelivered") s.counters.redelivered += n;
      else if (k == "dead") s.counters.dead += n;
    }
    AddLateness(a[9], &buckets, &count, &sum_us, &max_us);
  }
  s.lateness = Summarize(buckets, count, sum_us, max_us);
  return s;
}

Result<std::vector<QueueStats>> RedisQueue::ListQueues() {
  auto names = client_->Call(kRegistry, {"SMEMBERS", kRegistry});
  if (!names.ok()) return names.status();
  std::vector<std::string> list;
  for (const auto& n : names->array) list.push_back(n.str);
  std::sort(list.begin(), list.end());
  std::vector<QueueStats> out;
  for (const auto& name : list) {
    auto s = Stats(name);
    if (s.ok()) out.push_back(std::move(*s));
  }
  return out;
}

Result<ScheduleHistogram> RedisQueue::Schedule(std::string_view queue_view, int64_t bucket_ms, int32_t buckets) {
  DELAYQ_RETURN_IF_ERROR(ValidateScheduleHistogram(bucket_ms, buckets));
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  ScheduleHistogram h;
  h.bucket_ms = bucket_ms;
  h.buckets.assign(static_cast<size_t>(buckets), 0);
  for (int shard = 0; shard < shards; ++shard) {
    auto v = Run(kScheduleScript, std::string(queue_view), shard, {std::to_string(bucket_ms), std::to_string(buckets)});
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    h.start_ms = v->array[0].AsInt();
    h.later += v->array[1].AsInt();
    for (int32_t i = 0; i < buckets && static_cast<size_t>(i + 2) < v->array.size(); ++i) {
      h.buckets[static_cast<size_t>(i)] += v->array[static_cast<size_t>(i + 2)].AsInt();
    }
  }
  return h;
}

Result<QueueConfig> RedisQueue::GetConfig(std::string_view queue) {
  auto info = Info(queue, false);
  if (info.code() == Code::kNotFound) return options_.default_queue_config;
  if (!info.ok()) return info.status();
  std::lock_guard lock(mu_);
  return (*info)->config;
}

Status RedisQueue::SetConfig(std::string_view queue, const QueueConfig& config) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  DELAYQ_RETURN_IF_ERROR(ValidateConfig(config));
  auto info = Info(queue, true);
  if (!info.ok()) return info.status();
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  return WriteConfig(std::string(queue), config, shards);
}

Result<int64_t> RedisQueue::DeleteQueue(std::string_view queue_view, bool force) {
  auto info = Info(queue_view, false);
  if (!info.ok()) return info.status();
  const std::string queue(queue_view);
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  // Without force, every shard is counted first, so the refusal names all the jobs and touches
  // nothing. Then shard by shard; a job that arrives meanwhile still stops a shard's delete (the
  // empty shards before it are gone, which loses nothing: the queue stays, with its config).
  if (!force) {
    int64_t jobs = 0;
    for (int shard = 0; shard < shards; ++shard) {
      std::string meta;
      {
        std::lock_guard lock(mu_);
        meta = Keys(queue, shard)[2];
      }
      auto n = client_->Call(meta, {"HLEN", meta});
      if (!n.ok()) return n.status();
      jobs += n->AsInt();
    }
    if (jobs > 0) return errors::QueueNotEmpty(queue, jobs);
  }
  int64_t deleted = 0;
  for (int shard = 0; shard < shards; ++shard) {
    auto v = Run(kDeleteQueueScript, queue, shard, {force ? "1" : "0"}, true);
    if (!v.ok()) return v.status();
    if (v->is_error()) return ScriptError(*v);
    if (v->array.size() < 2) return Status::Internal("the delete_queue script answered no counts");
    if (v->array[0].AsInt() == 0) return errors::QueueNotEmpty(queue, v->array[1].AsInt());
    deleted += v->array[1].AsInt();
  }
  const std::string home = HomeConfigKey(queue);
  auto unlinked = client_->Call(home, {"UNLINK", home});
  if (!unlinked.ok()) return unlinked.status();
  auto reg = client_->Call(kRegistry, {"SREM", kRegistry, queue});
  if (!reg.ok()) return reg.status();
  std::lock_guard lock(mu_);
  if (auto q = queues_.find(queue); q != queues_.end()) {
    QueueInfo fresh;  // waiters wait on, as on any name that is not a queue
    fresh.name = queue;
    fresh.waiters = std::move(q->second.waiters);
    q->second = std::move(fresh);
    DropIfUnusedLocked(queue);
  }
  ++config_writes_;  // a config read in flight must not bring the deleted config back
  return deleted;
}

Status RedisQueue::Pause(std::string_view queue) { return SetPaused(queue, true); }

Status RedisQueue::Resume(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(SetPaused(queue, false));
  std::lock_guard lock(mu_);
  ready_notices_.insert(std::string(queue));
  Poke();
  return Status::Ok();
}

Status RedisQueue::SetPaused(std::string_view queue, bool paused) {
  auto info = Info(queue, true);
  if (!info.ok()) return info.status();
  int shards;
  {
    std::lock_guard lock(mu_);
    shards = (*info)->shards;
  }
  for (int shard = 0; shard < shards; ++shard) {
    std::string key;
    {
      std::lock_guard lock(mu_);
      key = Keys(std::string(queue), shard)[10];
    }
    auto v = client_->Call(key, {"HSET", key, "paused", paused ? "1" : "0"});
    if (!v.ok()) return v.status();
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// The scheduler and the wake channel

void RedisQueue::Poke() {
  poked_ = true;
  cv_.notify_all();
}

void RedisQueue::ServeWaiters(const std::string& queue) {
  while (true) {
    uint64_t handle = 0;
    Waiter w;
    {
      std::lock_guard lock(mu_);
      auto q = queues_.find(queue);
      if (closed_ || q == queues_.end()) return;
      while (!q->second.waiters.empty() && !waiters_.contains(q->second.waiters.front())) q->second.waiters.pop_front();
      if (q->second.waiters.empty()) return;
      handle = q->second.waiters.front();
      q->second.waiters.pop_front();
      auto it = waiters_.find(handle);
      w = std::move(it->second);
      waiters_.erase(it);
      serving_.insert(handle);  // a CancelReserve meanwhile is noted, not lost
    }
    ReserveRequest now = w.request;
    now.wait_ms = 0;
    auto jobs = ReserveNow(queue, now);
    {
      std::lock_guard lock(mu_);
      serving_.erase(handle);
      const bool cancelled = cancelled_while_serving_.erase(handle) > 0;
      if (jobs.ok() && jobs->empty() && !cancelled && !closed_) {  // nothing for it after all: back at the front
        waiters_.emplace(handle, std::move(w));
        queues_[queue].waiters.push_front(handle);
        return;
      }
    }
    w.done(std::move(jobs));
  }
}

void RedisQueue::SchedulerLoop() {
  int64_t next_safety = 0, next_registry = 0;
  std::unique_lock lock(mu_);
  while (!closed_) {
    const int64_t steady = SteadyMs();
    const int64_t redis_now = steady + clock_offset_ms_;
    bool probe = false;
    if (steady >= next_safety) {
      // Every queue is looked at, and every waiting reserve tries again: a wake message can be
      // lost, and a job promoted by another process is announced only by one.
      for (auto& [name, q] : queues_) {
        q.check = true;
        if (!q.waiters.empty()) ready_notices_.insert(name);
      }
      next_safety = steady + options_.safety_interval_ms;
      probe = true;
    }
    // What is due now: promotions, expired leases, waiter timeouts, ready notices.
    std::vector<std::pair<std::string, int>> promote, reap;
    std::vector<std::pair<std::string, std::pair<int, int64_t>>> expire;  // (queue, (shard, retention))
    std::vector<std::string> unloaded;  // learned from the wake channel: read their config first
    for (auto& [name, q] : queues_) {
      if (q.config_read_at < 0 || q.next_due.size() < static_cast<size_t>(q.shards)) {
        if (q.absent_until <= steady) unloaded.push_back(name);
        continue;
      }
      for (int s = 0; s < q.shards; ++s) {
        const auto i = static_cast<size_t>(s);
        if (q.check || (q.next_due[i] >= 0 && q.next_due[i] <= redis_now)) promote.emplace_back(name, s);
        if (q.check || (q.next_lease[i] >= 0 && q.next_lease[i] <= redis_now)) reap.emplace_back(name, s);
        if (q.next_dead[i] >= 0 && q.next_dead[i] + q.config.dead_retention_ms <= redis_now) {
          expire.emplace_back(name, std::pair(s, q.config.dead_retention_ms));
        }
      }
      q.check = false;
    }
    std::vector<ReserveCallback> expired;
    std::set<std::string> left;  // queues some waiter left
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline <= steady) {
        expired.push_back(std::move(it->second.done));
        left.insert(it->second.queue);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& name : left) DropIfUnusedLocked(name);
    const bool refresh_registry = steady >= next_registry;
    if (refresh_registry) next_registry = steady + kRegistryRefreshMs;
    std::set<std::string> notices;
    notices.swap(ready_notices_);
    // A lost wake message (the channel was down, or not yet subscribed) must not strand a waiter
    // on a job that is already ready: each safety interval, every queue with waiters is tried.
    if (probe) {
      for (auto& [name, q] : queues_) {
        if (!q.waiters.empty()) notices.insert(name);
      }
    }
    poked_ = false;
    lock.unlock();

    for (auto& done : expired) done(std::vector<Delivery>{});
    if (probe) {  // keeps Health() current even with no queue to look at
      auto pong = client_->Call("", {"PING"});
      Observe(pong.ok() ? Status::Ok() : pong.status());
    }
    for (const auto& name : unloaded) {
      auto info = Info(name, false);
      std::lock_guard g(mu_);
      auto q = queues_.find(name);
      if (q == queues_.end()) continue;
      if (info.ok()) {
        q->second.check = true;
        poked_ = true;
      } else if (info.status().code() == Code::kNotFound) {
        q->second.absent_until = SteadyMs() + options_.safety_interval_ms;
      }
    }
    if (refresh_registry) {
      Status secret = LoadReceiptSecret();
      if (!secret.ok()) spdlog::warn("reading the receipt secret from Redis: {}", secret.message());
      auto names = client_->Call(kRegistry, {"SMEMBERS", kRegistry});
      if (names.ok()) {
        for (const auto& n : names->array) {
          if (ValidateQueueName(n.str).ok()) (void)Info(n.str, false);
        }
      }
    }
    for (const auto& [name, shard] : promote) {
      auto v = Run(kPromoteScript, name, shard, {std::to_string(kChunk)});
      if (!v.ok() || v->is_error() || v->array.size() < 4) {
        if (!v.ok()) spdlog::warn("promoting queue {}: {}", name, v.status().message());
        continue;
      }
      std::lock_guard g(mu_);
      auto& q = queues_[name];
      if (q.next_due.size() <= static_cast<size_t>(shard)) continue;
      clock_offset_ms_ = v->array[3].AsInt() - SteadyMs();
      q.next_due[static_cast<size_t>(shard)] = v->array[1].AsInt();
      q.next_lease[static_cast<size_t>(shard)] = v->array[2].AsInt();
      if (v->array.size() > 4) q.next_dead[static_cast<size_t>(shard)] = v->array[4].AsInt();
      if (v->array[0].AsInt() > 0) notices.insert(name);
      if (v->array[0].AsInt() >= static_cast<int64_t>(kChunk)) q.check = true;  // more to move
    }
    for (const auto& [name, shard] : reap) {
      auto v = Run(kReapScript, name, shard, {std::to_string(kClaimIdleMs), std::to_string(kChunk)});
      if (!v.ok() || v->is_error() || v->array.size() < 3) continue;
      std::lock_guard g(mu_);
      auto& q = queues_[name];
      if (q.next_lease.size() <= static_cast<size_t>(shard)) continue;
      q.next_lease[static_cast<size_t>(shard)] = v->array[1].AsInt();
      if (v->array.size() > 3) q.next_dead[static_cast<size_t>(shard)] = v->array[3].AsInt();
      if (v->array[0].AsInt() > 0) notices.insert(name);
    }
    // Dead jobs past their retention, planned like the embedded store's sweep: at the moment the
    // oldest dead job of a shard runs out, at most kChunk per shard per turn.
    for (const auto& [name, where] : expire) {
      const auto [shard, retention] = where;
      auto v = Run(kDeadExpireScript, name, shard, {std::to_string(retention), std::to_string(kChunk)});
      if (!v.ok() || v->is_error() || v->array.size() < 3) {
        if (!v.ok()) spdlog::warn("deleting dead jobs past retention in queue {}: {}", name, v.status().message());
        continue;
      }
      std::lock_guard g(mu_);
      auto& q = queues_[name];
      if (q.next_dead.size() <= static_cast<size_t>(shard)) continue;
      q.next_dead[static_cast<size_t>(shard)] = v->array[1].AsInt();
    }
    for (const auto& name : notices) ServeWaiters(name);

    lock.lock();
    if (closed_ || poked_ || !ready_notices_.empty()) continue;
    // Sleep until the earliest deadline we know of.
    int64_t wake = next_safety;
    const int64_t offset = clock_offset_ms_;
    const int64_t now_steady = SteadyMs();
    auto to_steady = [&](int64_t redis_ms) { return redis_ms - offset; };
    for (auto& [name, q] : queues_) {
      if (q.check) wake = now_steady;
      for (size_t s = 0; s < q.next_due.size(); ++s) {
        if (q.next_due[s] >= 0) wake = std::min(wake, to_steady(q.next_due[s]));
        if (q.next_lease[s] >= 0) wake = std::min(wake, to_steady(q.next_lease[s]));
        if (q.next_dead[s] >= 0) wake = std::min(wake, to_steady(q.next_dead[s] + q.config.dead_retention_ms));
      }
    }
    for (auto& [h, w] : waiters_) wake = std::min(wake, w.deadline);
    if (wake > now_steady) {
      cv_.wait_for(lock, std::chrono::milliseconds(wake - now_steady), [this] { return closed_ || poked_; });
    }
  }
}

void RedisQueue::SubscriberLoop() {
  int backoff_ms = 100;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
    }
    std::string error;
    auto conn = client_->Dedicated(&error);
    if (conn && conn->Send({"PSUBSCRIBE", "dq:*:wake"}).ok()) {
      backoff_ms = 100;
      {
        std::lock_guard lock(mu_);  // messages may have been missed while disconnected
        for (auto& [name, q] : queues_) {
          q.check = true;
          if (!q.waiters.empty()) ready_notices_.insert(name);  // a job may have come meanwhile
        }
        Poke();
      }
      while (true) {
        {
          std::lock_guard lock(mu_);
          if (closed_) return;
        }
        auto v = conn->Read(250);
        if (!v.ok()) {
          spdlog::warn("the Redis wake channel dropped ({}); reconnecting", v.status().message());
          break;
        }
        // ["pmessage", pattern, "dq:{tag}:wake", payload]
        if (v->type != Value::kArray || v->array.size() < 4 || v->array[0].str != "pmessage") continue;
        const std::string& channel = v->array[2].str;
        const std::string& payload = v->array[3].str;
        auto open = channel.find('{'), close = channel.rfind('}');
        if (open == std::string::npos || close == std::string::npos || close <= open) continue;
        std::string tag = channel.substr(open + 1, close - open - 1);
        int shard = 0;
        if (auto hash = tag.rfind('#'); hash != std::string::npos) {
          shard = std::atoi(tag.c_str() + hash + 1);
          tag = tag.substr(0, hash);
        }
        std::lock_guard lock(mu_);
        auto& q = queues_[tag];
        if (q.name.empty()) {  // a queue this process has not seen: learn it at the next tick
          q.name = tag;
          q.check = true;
        }
        q.absent_until = 0;  // it exists now, if it did not
        if (payload.rfind("due ", 0) == 0 && static_cast<size_t>(shard) < q.next_due.size()) {
          const int64_t due = std::atoll(payload.c_str() + 4);
          auto& next = q.next_due[static_cast<size_t>(shard)];
          if (next < 0 || due < next) next = due;
        } else if (payload == "ready") {
          ready_notices_.insert(tag);
        } else {
          q.check = true;
        }
        Poke();
      }
    }
    if (!conn) spdlog::warn("the Redis wake channel: {}; retrying in {} ms", error, backoff_ms);
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(backoff_ms), [this] { return closed_; });
    backoff_ms = std::min(backoff_ms * 2, 2000);
  }
}

// ---------------------------------------------------------------------------------------------
// delayq doctor

Result<std::vector<DoctorFinding>> Doctor(std::string_view url_text) {
  auto url = RedisUrl::Parse(url_text);
  if (!url.ok()) return url.status();
  auto client = RedisClient::Connect(*url);
  if (!client.ok()) return client.status();
  std::vector<DoctorFinding> findings;
  std::vector<Endpoint> nodes = (*client)->Masters();
  if (nodes.empty()) nodes = url->endpoints;
  auto config = [&](const Endpoint& node, const std::string& name) -> std::string {
    auto v = (*client)->CallNode(node, {"CONFIG", "GET", name});
    if (!v.ok()) return "?" + v.status().message();
    if (v->is_error()) return "?" + v->str;
    return v->array.size() >= 2 ? v->array[1].str : "?missing";
  };
  for (const Endpoint& node : nodes) {
    const std::string where = node.ToString();
    std::string version;
    auto info = (*client)->CallNode(node, {"INFO", "server"});
    if (info.ok()) {
      auto p = info->str.find("redis_version:");
      if (p != std::string::npos) version = info->str.substr(p + 14, info->str.find('\r', p) - p - 14);
    }
    int major = 0, minor = 0;
    std::sscanf(version.c_str(), "%d.%d", &major, &minor);
    if (version.empty() || major < 6 || (major == 6 && minor < 2)) {
      findings.push_back({where, fmt::format("Redis {} is older than 6.2: delayq needs XAUTOCLAIM and "
                                             "XPENDING IDLE, which came with 6.2",
                                             version.empty() ? "of unknown version" : version),
                          "upgrade Redis to 6.2 or later (7.x recommended)"});
    }
    const std::string policy = config(node, "maxmemory-policy");
    if (policy.rfind('?', 0) == 0) {
      findings.push_back({where, "CONFIG GET is refused (" + policy.substr(1) + "), so the settings that lose jobs cannot be checked",
                          "allow CONFIG GET for the user delayq connects as, and run doctor again"});
      continue;
    }
    if (policy != "noeviction") {
      findings.push_back({where, fmt::format("maxmemory-policy is {}: when Redis fills up it deletes keys, "
                                             "which loses jobs without an error",
                                             policy),
                          "CONFIG SET maxmemory-policy noeviction (and set it in redis.conf); Redis "
                          "then refuses writes when full, and delayq reports them as errors"});
    }
    if (config(node, "appendonly") != "yes") {
      findings.push_back({where, "appendonly is no: a Redis restart loses every job written since the last "
                                 "RDB snapshot",
                          "CONFIG SET appendonly yes and CONFIG SET appendfsync everysec (and in redis.conf)"});
    } else {
      const std::string fsync = config(node, "appendfsync");
      if (fsync != "everysec" && fsync != "always") {
        findings.push_back({where, fmt::format("appendfsync is {}: a crash of the machine loses what the OS had "
                                               "not yet written",
                                               fsync),
                            "CONFIG SET appendfsync everysec (at most a second lost) or always"});
      }
    }
    if ((*client)->cluster()) {
      auto ci = (*client)->CallNode(node, {"CLUSTER", "INFO"});
      const std::string text = ci.ok() ? ci->str : "";
      auto field = [&](const std::string& name) {
        auto p = text.find(name + ":");
        if (p == std::string::npos) return std::string("?");
        return text.substr(p + name.size() + 1, text.find('\r', p) - p - name.size() - 1);
      };
      if (field("cluster_state") != "ok" || field("cluster_slots_ok") != "16384") {
        findings.push_back({where,
                            fmt::format("the cluster state is {} with {} of 16384 slots served: jobs in "
                                        "the missing slots can be neither written nor delivered",
                                        field("cluster_state"), field("cluster_slots_ok")),
                            "assign every slot to a master (redis-cli --cluster fix HOST:PORT)"});
      }
    }
  }
  return findings;
}

}  // namespace delayq::redis
