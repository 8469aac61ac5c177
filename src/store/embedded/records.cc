// Where a job's record is: inline in its due entry while the job is still at the place its id
// is tagged with (one row per scheduled job), else in `jobs`. The layout and its rule are in
// keys.h; this file is the only one that decides where to read a record from.
#include "store/embedded/records.h"

namespace delayq {
namespace {

// The record inline in the due entry `value`, moved into *record; kNotFound when the entry
// holds none (the record is in `jobs`).
Status TakeInlineRecord(std::string&& value, std::string* record) {
  DueRecord due;
  DELAYQ_RETURN_IF_ERROR(DecodeDueRecord(value, &due));
  if (due.record.empty()) return Status::NotFound("");
  value.erase(0, value.size() - due.record.size());  // the record is the entry's tail
  *record = std::move(value);
  return Status::Ok();
}

}  // namespace

Status ReadRecord(Storage& storage, std::string_view queue, const Ulid& id, const DueKey* key, JobRecord* record,
                  bool* in_due, std::string* raw) {
  std::string local;
  std::string& bytes = raw ? *raw : local;
  bool inside = false;
  auto from_due = [&](const DueKey& place) -> Status {
    std::string value;
    DELAYQ_RETURN_IF_ERROR(storage.Get(Cf::kDue, DueIndexKey(queue, place), &value));
    DELAYQ_RETURN_IF_ERROR(TakeInlineRecord(std::move(value), &bytes));
    inside = true;
    return Status::Ok();
  };
  Status s;
  if (key && AtIdPlace(*key)) {
    s = from_due(*key);
    // Moved away and back to its id's place: the record is in `jobs`.
    if (s.code() == Code::kNotFound) s = storage.Get(Cf::kJobs, id.Raw(), &bytes);
  } else {
    s = storage.Get(Cf::kJobs, id.Raw(), &bytes);
    if (!key && s.code() == Code::kNotFound && IdTag(id) != kNoBucketTag) s = from_due(IdPlace(id));
  }
  if (!s.ok()) return s;
  if (in_due) *in_due = inside;
  return DecodeJobRecord(bytes, record);
}

std::vector<Status> ReadRecords(Storage& storage, std::string_view queue, const std::vector<DueKey>& keys,
                                std::vector<std::string>* records, std::vector<bool>* in_due) {
  const size_t n = keys.size();
  std::vector<Status> out(n);
  records->assign(n, {});
  in_due->assign(n, false);
  std::vector<size_t> at_place;
  std::vector<size_t> in_jobs;
  std::vector<std::string> lookups;
  for (size_t i = 0; i < n; ++i) {
    if (AtIdPlace(keys[i])) {
      at_place.push_back(i);
      lookups.push_back(DueIndexKey(queue, keys[i]));
    } else {
      in_jobs.push_back(i);
    }
  }
  std::vector<std::string> values;
  if (!lookups.empty()) {
    std::vector<Status> reads = storage.MultiGet(Cf::kDue, lookups, &values);
    for (size_t j = 0; j < at_place.size(); ++j) {
      const size_t i = at_place[j];
      Status s = reads[j].ok() ? TakeInlineRecord(std::move(values[j]), &(*records)[i]) : reads[j];
      if (s.code() == Code::kNotFound) {
        in_jobs.push_back(i);  // moved away and back to its id's place (or a bug): look in `jobs`
      } else {
        out[i] = std::move(s);
        (*in_due)[i] = out[i].ok();
      }
    }
  }
  if (!in_jobs.empty()) {
    lookups.clear();
    for (size_t i : in_jobs) lookups.emplace_back(keys[i].id.Raw());
    std::vector<Status> reads = storage.MultiGet(Cf::kJobs, lookups, &values);
    for (size_t j = 0; j < in_jobs.size(); ++j) {
      out[in_jobs[j]] = std::move(reads[j]);
      (*records)[in_jobs[j]] = std::move(values[j]);
    }
  }
  return out;
}

void PutNewJob(WriteBatch& batch, std::string_view queue, const DueKey& key, const JobRecord& record) {
  const std::string encoded = EncodeJobRecord(record);
  DueRecord due{key.due_ms, 0, {}, 0};
  due.priority = record.priority;
  due.group = record.group;
  if (AtIdPlace(key) && encoded.size() <= kInlineRecordMaxBytes) {
    due.record = encoded;
  } else {
    batch.Put(Cf::kJobs, key.id.Raw(), encoded);
  }
  batch.Put(Cf::kDue, DueIndexKey(queue, key), EncodeDueRecord(due));
}

}  // namespace delayq
