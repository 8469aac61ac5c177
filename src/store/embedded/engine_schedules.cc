// Schedules on the embedded store: the rows ScheduleStore asks for (keys.h: meta "sched"), each
// the generation (8 bytes, big-endian) then the record (schedule/schedule_store.h). The rules are
// the runner's (schedule/runner.h), which ScheduledQueue runs over these rows.
#include <fmt/format.h>

#include "core/validate.h"
#include "store/embedded/engine_impl.h"

namespace delayq {
namespace {

Status DecodeRow(std::string_view queue, std::string_view value, StoredSchedule* s) {
  if (value.size() < 8) return Status::Corruption("a schedule row of queue " + std::string(queue) + " is too short");
  DELAYQ_RETURN_IF_ERROR(DecodeSchedule(value.substr(8), s));
  s->queue = std::string(queue);
  s->state.generation = GetBigEndian64(value.substr(0, 8));
  return Status::Ok();
}

Status Changed(std::string_view queue, std::string_view name) {
  return Status::Conflict(
      fmt::format("schedule {} of queue {} changed meanwhile; read it again", name.substr(0, 200), queue));
}

}  // namespace

// The engine's schedule rows, with its lock and its queues (a first schedule creates its queue).
class EngineImpl::ScheduleRows final : public ScheduleStore {
 public:
  explicit ScheduleRows(EngineImpl& engine) : e_(engine) {}
  Result<std::optional<StoredSchedule>> LoadSchedule(std::string_view queue, std::string_view name) override;
  Result<std::vector<StoredSchedule>> LoadSchedules(std::string_view queue) override;
  Status StoreSchedule(const StoredSchedule& s, uint64_t expected) override;
  Status EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) override;

 private:
  EngineImpl& e_;
};

ScheduleStore& EngineImpl::schedule_rows() {
  if (!schedule_rows_) schedule_rows_ = std::make_unique<ScheduleRows>(*this);
  return *schedule_rows_;
}

Result<std::optional<StoredSchedule>> EngineImpl::ScheduleRows::LoadSchedule(std::string_view queue,
                                                                             std::string_view name) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(e_, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  std::string raw;
  Status s = e_.storage_->Get(Cf::kMeta, ScheduleKey(queue, name), &raw);
  if (s.code() == Code::kNotFound) return std::optional<StoredSchedule>{};
  DELAYQ_RETURN_IF_ERROR(s);
  StoredSchedule out;
  DELAYQ_RETURN_IF_ERROR(DecodeRow(queue, raw, &out));
  return std::optional(std::move(out));
}

Result<std::vector<StoredSchedule>> EngineImpl::ScheduleRows::LoadSchedules(std::string_view queue) {
  Op op(e_, Op::kReads);
  DELAYQ_RETURN_IF_ERROR(op.status());
  std::vector<StoredSchedule> out;
  auto cursor = e_.storage_->Scan(Cf::kMeta, SchedulePrefix(queue), SchedulePrefixEnd(queue));
  const size_t prefix = SchedulePrefix("").size();
  for (; cursor->Valid(); cursor->Next()) {
    // "sched" \0 queue \0 name: the queue is what lies between the two NULs.
    std::string_view rest = cursor->key().substr(prefix);
    const size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) return Status::Corruption("a schedule row's key is malformed");
    StoredSchedule s;
    DELAYQ_RETURN_IF_ERROR(DecodeRow(rest.substr(0, nul), cursor->value(), &s));
    out.push_back(std::move(s));
  }
  DELAYQ_RETURN_IF_ERROR(cursor->status());
  return out;
}

Status EngineImpl::ScheduleRows::StoreSchedule(const StoredSchedule& s, uint64_t expected) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(s.queue));
  Op op(e_, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  const std::string key = ScheduleKey(s.queue, s.spec.name);
  std::string raw;
  Status found = e_.storage_->Get(Cf::kMeta, key, &raw);
  if (!found.ok() && found.code() != Code::kNotFound) return found;
  const uint64_t generation = found.ok() && raw.size() >= 8 ? GetBigEndian64(raw.substr(0, 8)) : 0;
  if (generation != expected) return Changed(s.queue, s.spec.name);
  auto batch = e_.storage_->NewBatch();
  if (expected == 0) {  // a new schedule: within the limits, and its queue exists
    size_t count = 0;
    auto cursor = e_.storage_->Scan(Cf::kMeta, SchedulePrefix(s.queue), SchedulePrefixEnd(s.queue));
    for (; cursor->Valid(); cursor->Next()) ++count;
    DELAYQ_RETURN_IF_ERROR(cursor->status());
    if (count >= ScheduleLimits::kMaxPerQueue) {
      return Status::ResourceExhausted(
          fmt::format("queue {} has {} schedules, the most a queue may have; delete one first", s.queue,
                      ScheduleLimits::kMaxPerQueue));
    }
    const bool existed = e_.FindQueueLocked(s.queue) != nullptr;
    auto q = e_.CreateQueueLocked(s.queue);
    if (!q.ok()) return q.status();
    if (!existed) batch->Put(Cf::kMeta, MetaQueueKey(s.queue), EncodeQueueMeta((*q)->meta));  // kept on restart
  }
  std::string value;
  PutBigEndian64(&value, expected == 0 ? FirstGeneration() : expected + 1);
  value.append(EncodeSchedule(s));
  batch->Put(Cf::kMeta, key, value);
  DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
  return op.Finish();
}

Status EngineImpl::ScheduleRows::EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  Op op(e_, Op::kWrites);
  DELAYQ_RETURN_IF_ERROR(op.status());
  const std::string key = ScheduleKey(queue, name);
  std::string raw;
  Status found = e_.storage_->Get(Cf::kMeta, key, &raw);
  if (found.code() == Code::kNotFound) return Status::NotFound("no such schedule");
  DELAYQ_RETURN_IF_ERROR(found);
  if (raw.size() < 8 || GetBigEndian64(raw.substr(0, 8)) != expected) return Changed(queue, name);
  auto batch = e_.storage_->NewBatch();
  batch->Delete(Cf::kMeta, key);
  DELAYQ_RETURN_IF_ERROR(op.Write(*batch));
  return op.Finish();
}

}  // namespace delayq
