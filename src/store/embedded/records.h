// Where a job's record is (the layout and its rule are in keys.h): inline in its due entry while
// the job is still at the place its id is tagged with, else in `jobs`. records.cc is the only code
// that decides where to read a record from.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/record.h"
#include "store/embedded/keys.h"
#include "store/embedded/storage.h"

namespace delayq {

// Reads job `id`'s record. With its due place `key` (when the caller knows it): inline there
// when that is the id's place and the entry holds it, else from `jobs`. With no key: from
// `jobs`, else inline at the id's place. *in_due (when given) tells where it was; *raw (when
// given) gets the encoded record. kNotFound: the job has no record.
Status ReadRecord(Storage& storage, std::string_view queue, const Ulid& id, const DueKey* key, JobRecord* record,
                  bool* in_due = nullptr, std::string* raw = nullptr);

// The encoded records of the live jobs at `keys` (of one queue), read together: one Status per
// key, (*records)[i] its encoded record and (*in_due)[i] whether it was inline.
std::vector<Status> ReadRecords(Storage& storage, std::string_view queue, const std::vector<DueKey>& keys,
                                std::vector<std::string>* records, std::vector<bool>* in_due);

// Puts a new job's record and due entry into `batch`: one inline row when the job is at its id's
// place and the record is small, else the two-row layout.
void PutNewJob(WriteBatch& batch, std::string_view queue, const DueKey& key, const JobRecord& record);

}  // namespace delayq
