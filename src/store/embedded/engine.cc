// The embedded store's lifecycle, the operation guard (Op) and the set of queues. Its operations
// are in engine_jobs.cc, engine_delivery.cc, engine_dead.cc and engine_queues.cc; every one that
// writes: validate, plan a WriteBatch under the lock, write it, apply it to memory, release the
// lock, wait for durability.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>

#include "core/errors.h"
#include "core/mutant.h"
#include "core/validate.h"
#include "schedule/scheduled_queue.h"
#include "store/embedded/engine_impl.h"

namespace delayq {
namespace {

// The engine with its recurring schedules (schedule/scheduled_queue.h): what Engine::Open gives.
class ScheduledEngine final : public ScheduledQueue<Engine> {
 public:
  using ScheduledQueue<Engine>::ScheduledQueue;
  ~ScheduledEngine() override { Close(); }
  void Close() override {
    StopSchedules();  // first: its thread calls the store
    store().Close();
  }
  bool Ready() const override { return true; }
  EngineInfo Info() override { return store().Info(); }
};

}  // namespace

EngineImpl::EngineImpl(const EngineOptions& options, std::unique_ptr<Storage> storage)
    : options_(options),
      clock_(options.clock ? options.clock : SystemClock::Instance()),
      storage_(std::move(storage)),
      commit_(storage_.get()),
      outcomes_({[this](std::string_view queue, const JobRef& ref) { return Get(queue, ref); }, {}}),
      rng_(std::random_device{}()) {}

EngineImpl::~EngineImpl() { Close(); }

Status EngineImpl::Start() {
  if (ActiveMutant()) {  // core/mutant.h: a build for make check-mutants, with a defect turned on
    if (!ActiveMutantKnown()) {
      return Status::InvalidArgument(
          fmt::format("DELAYQ_MUTANT={} names no seeded defect of core/mutant.h", ActiveMutant()));
    }
    spdlog::warn("MUTANT {} is on: this build carries seeded defects for make check-mutants; it loses jobs",
                 ActiveMutant());
  }
  {
    std::lock_guard lock(mu_);
    DELAYQ_RETURN_IF_ERROR(LoadReceiptSecretLocked());
    DELAYQ_RETURN_IF_ERROR(RecoverLocked());
  }
  clock_listener_ = clock_->AddListener([this] {
    std::lock_guard lock(mu_);
    poked_ = true;
    cv_.notify_one();
  });
  if (options_.durability == Durability::kInterval) {
    commit_.StartInterval(options_.sync_interval_ms);
  }
  scheduler_ = std::thread([this] { SchedulerLoop(); });
  return Status::Ok();
}

// The secret that signs receipts: made once, stored durably before any receipt is issued, so
// receipts stay valid across restarts.
Status EngineImpl::LoadReceiptSecretLocked() {
  static constexpr std::string_view kKey = "receipt-secret";
  std::string secret;
  Status s = storage_->Get(Cf::kMeta, kKey, &secret);
  if (s.code() == Code::kNotFound || (s.ok() && secret.size() != ReceiptSigner::kSecretBytes)) {
    secret = ReceiptSigner::NewSecret();
    auto batch = storage_->NewBatch();
    batch->Put(Cf::kMeta, kKey, secret);
    DELAYQ_RETURN_IF_ERROR(storage_->Write(*batch));
    DELAYQ_RETURN_IF_ERROR(storage_->SyncWal());
  } else {
    DELAYQ_RETURN_IF_ERROR(s);
  }
  signer_.emplace(std::move(secret));
  return Status::Ok();
}

void EngineImpl::Close() {
  outcomes_.Close();  // first: its thread reads jobs
  {
    Deferred deferred;  // runs after the lock is released
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (Waiter& waiter : waiters_.TakeAll()) {
      deferred.Add([done = std::move(waiter.done)] { done(std::vector<Delivery>{}); });
    }
    cv_.notify_all();
  }
  if (scheduler_.joinable()) scheduler_.join();
  clock_->RemoveListener(clock_listener_);
  commit_.Stop();
  Status s = commit_.SyncAll();
  if (!s.ok()) spdlog::error("closing the store: {}", s.ToString());
}

uint64_t EngineImpl::WaitOutcomeAsync(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) {
  return outcomes_.Wait(queue, ref, wait_ms, std::move(done));
}

void EngineImpl::CancelOutcomeWait(uint64_t handle) { outcomes_.Cancel(handle); }

EngineInfo EngineImpl::Info() {
  std::lock_guard lock(mu_);
  return {window_entries_,
          ready_entries_,
          leases_.size(),
          waiters_.size(),
          queues_.size(),
          write_seq_,
          commit_.syncs(),
          lock_stats_.acquisitions,
          lock_stats_.contended,
          lock_stats_.wait_ns / 1000,
          lock_stats_.held_ns / 1000};
}

Status EngineImpl::Health() {
  std::lock_guard lock(mu_);
  DELAYQ_RETURN_IF_ERROR(CheckOpenLocked());
  Status why;
  if (!storage_->Healthy(&why)) {
    return Status::Unavailable("the store cannot write until its disk works again: " + why.message());
  }
  return Status::Ok();
}

Status EngineImpl::CheckOpenLocked() const {
  if (closed_) return errors::StoreClosed();
  return Status::Ok();
}

namespace {
int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

EngineImpl::Op::Op(EngineImpl& engine, Kind kind)
    : engine_(engine),
      in_flight_(kind == kWrites && engine.options_.durability == Durability::kSync ? &engine.commit_ : nullptr),
      lock_(engine.mu_, std::defer_lock) {
  // How long operations wait for the engine's one lock and hold it (EngineInfo): the measure of
  // whether that lock limits anything (docs/performance.md). Two clock reads per operation.
  const int64_t asked = SteadyNs();
  const bool contended = !lock_.try_lock();
  if (contended) lock_.lock();
  locked_at_ns_ = SteadyNs();
  LockStats& stats = engine_.lock_stats_;
  ++stats.acquisitions;
  stats.contended += contended ? 1 : 0;
  stats.wait_ns += static_cast<uint64_t>(locked_at_ns_ - asked);
  now_ = engine.NowLocked();
  status_ = engine.CheckOpenLocked();
  if (status_.ok() && !engine_.storage_->Healthy()) engine_.HealLocked(deferred_);
  if (status_.ok()) engine_.TickLocked(now_, deferred_);
}

Status EngineImpl::Op::Write(WriteBatch& batch) {
  uint64_t seq = 0;
  DELAYQ_RETURN_IF_ERROR(engine_.WriteLocked(batch, &seq));
  seq_ = std::max(seq_, seq);
  return Status::Ok();
}

void EngineImpl::Op::Unlock() {
  if (lock_.owns_lock()) {
    engine_.lock_stats_.held_ns += static_cast<uint64_t>(SteadyNs() - locked_at_ns_);
    lock_.unlock();
  }
  in_flight_.Done();
  deferred_.Run();
}

Status EngineImpl::Op::Finish() {
  Unlock();
  return engine_.WaitDurable(seq_);
}

void EngineImpl::Op::FinishAsync(std::function<void(Status)> done) {
  Unlock();
  engine_.WhenDurable(seq_, std::move(done));
}

QueueState* EngineImpl::FindQueueLocked(std::string_view name) {
  auto it = queues_.find(name);
  return it == queues_.end() || it->second->provisional ? nullptr : it->second.get();
}

QueueState* EngineImpl::GetOrCreateQueueLocked(std::string_view name) {
  auto it = queues_.find(name);
  if (it != queues_.end()) {
    if (it->second->provisional) {
      it->second->provisional = false;
      ++queue_count_;
    }
    return it->second.get();
  }
  auto q = std::make_unique<QueueState>(std::string(name));
  ++queue_count_;
  return queues_.emplace(q->name, std::move(q)).first->second.get();
}

// kResourceExhausted when `name` is not a queue and there are options_.max_queues already.
Status EngineImpl::RoomForQueueLocked(std::string_view name) {
  if (FindQueueLocked(name) == nullptr && queue_count_ >= options_.max_queues) {
    return errors::QueueLimit(name, queue_count_ + 1, options_.max_queues);
  }
  return Status::Ok();
}

// The queue, created if it is new (RoomForQueueLocked first).
Result<QueueState*> EngineImpl::CreateQueueLocked(std::string_view name) {
  DELAYQ_RETURN_IF_ERROR(RoomForQueueLocked(name));
  return GetOrCreateQueueLocked(name);
}

// The queue or a provisional one, for a waiting reserve.
QueueState* EngineImpl::QueueForWaiterLocked(std::string_view name) {
  auto it = queues_.find(name);
  if (it != queues_.end()) return it->second.get();
  auto q = std::make_unique<QueueState>(std::string(name));
  q->provisional = true;
  return queues_.emplace(q->name, std::move(q)).first->second.get();
}

// Drops `q` when it is provisional and no waiter is left on it.
void EngineImpl::DropIfUnusedLocked(QueueState* q) {
  if (q == nullptr || !q->provisional) return;
  if (waiters_.AnyIn(q)) return;
  flow_wakes_.Erase(q);
  queues_.erase(q->name);
}

Status EngineImpl::WriteLocked(WriteBatch& batch, uint64_t* seq) {
  DELAYQ_RETURN_IF_ERROR(storage_->Write(batch));
  *seq = ++write_seq_;
  commit_.Written(*seq);
  return Status::Ok();
}

Status EngineImpl::WaitDurable(uint64_t seq) {
  if (seq == 0 || options_.durability != Durability::kSync) return Status::Ok();
  return commit_.WaitDurable(seq);
}

void EngineImpl::WhenDurable(uint64_t seq, std::function<void(Status)> done) {
  if (seq == 0 || options_.durability != Durability::kSync) return done(Status::Ok());
  commit_.WhenDurable(seq, std::move(done));
}

const char* DurabilityName(Durability d) {
  switch (d) {
    case Durability::kSync: return "sync";
    case Durability::kInterval: return "interval";
    case Durability::kNone: return "none";
  }
  return "unknown";
}

bool ParseDurability(std::string_view text, Durability* out) {
  for (Durability d : {Durability::kSync, Durability::kInterval, Durability::kNone}) {
    if (text == DurabilityName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

Result<std::unique_ptr<Engine>> OpenEngineOnStorage(const EngineOptions& options, std::unique_ptr<Storage> storage) {
  if (options.sync_interval_ms < 1 || options.sync_interval_ms > 60'000) {
    return Status::InvalidArgument(
        fmt::format("sync_interval_ms is {}; it must be between 1 and 60000", options.sync_interval_ms));
  }
  if (options.window_capacity < 16 || options.window_refill < 1 || options.window_refill > options.window_capacity) {
    return Status::InvalidArgument(
        fmt::format("window_capacity is {} and window_refill {}; the capacity must be at least 16 and the "
                    "refill between 1 and the capacity",
                    options.window_capacity, options.window_refill));
  }
  Status s = ValidateConfig(options.default_queue_config);
  if (!s.ok()) return Status::InvalidArgument("default queue config: " + s.message());
  auto engine = std::make_unique<EngineImpl>(options, std::move(storage));
  DELAYQ_RETURN_IF_ERROR(engine->Start());
  ScheduleStore& rows = engine->schedule_rows();
  const std::shared_ptr<Clock> clock = options.clock ? options.clock : SystemClock::Instance();
  return std::unique_ptr<Engine>(std::make_unique<ScheduledEngine>(std::move(engine), rows, clock, options.schedules));
}

Result<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& options) {
  if (options.path.empty()) {
    return Status::InvalidArgument("path is empty; give the directory to keep the jobs in");
  }
  auto storage = OpenRocksDbStorage({options.path, options.block_cache_bytes, options.write_buffer_bytes});
  if (!storage.ok()) return storage.status();
  return OpenEngineOnStorage(options, std::move(*storage));
}

}  // namespace delayq
