// The storage seam under the embedded engine: an ordered key-value store with column families,
// atomic write batches and an explicit log sync. RocksDbStorage is the real one; tests wrap it
// in FaultyStorage to make writes and syncs fail on demand.
//
// Contract: Write applies a whole batch or nothing and makes it visible to later reads at once,
// but durable only after a later SyncWal returns ok (or when the OS writes it back). Reads
// see every applied batch. All methods are thread-safe, but Heal must not run while another
// thread reads or writes (the engine calls everything but SyncWal under its lock).
//
// A failed write or sync (a full disk, an I/O error) leaves the store refusing writes: Write
// and SyncWal answer that error at once until Heal() makes it writable again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq {

// Column families (docs/architecture.md, The record format). Key layouts are in
// src/store/embedded/keys.h.
enum class Cf { kJobs = 0, kDue, kDead, kKeys, kMeta };
inline constexpr int kCfCount = 5;
const char* CfName(Cf cf);

class WriteBatch {
 public:
  virtual ~WriteBatch() = default;
  virtual void Put(Cf cf, std::string_view key, std::string_view value) = 0;
  virtual void Delete(Cf cf, std::string_view key) = 0;
  virtual size_t Count() const = 0;
  virtual size_t ByteSize() const = 0;
};

// Iterates keys in [lower, upper) in byte order.
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual bool Valid() const = 0;
  virtual void Next() = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // Not ok when iteration stopped because of an error (then Valid() is false).
  virtual Status status() const = 0;
};

struct StorageOptions {
  std::string path;
  size_t block_cache_bytes = 64 << 20;
  size_t write_buffer_bytes = 128 << 20;
};

class Storage {
 public:
  virtual ~Storage() = default;
  virtual std::unique_ptr<WriteBatch> NewBatch() = 0;
  virtual Status Write(WriteBatch& batch) = 0;
  virtual Status SyncWal() = 0;
  // kNotFound when the key is absent.
  virtual Status Get(Cf cf, std::string_view key, std::string* value) = 0;
  // Reads many keys at once (faster than one Get each); one Status per key, as for Get, and
  // one value per key in *values (empty where the Status is not ok).
  virtual std::vector<Status> MultiGet(Cf cf, const std::vector<std::string>& keys,
                                       std::vector<std::string>* values) = 0;
  virtual std::unique_ptr<Cursor> Scan(Cf cf, std::string_view lower, std::string_view upper) = 0;
  // Bytes on disk (SST files and logs), approximately.
  virtual uint64_t DiskBytes() = 0;

  // False after a write or sync failed, until Heal succeeds; then `why` (when given) is that
  // failure.
  virtual bool Healthy(Status* why = nullptr) const = 0;
  // Tries to make a store that refuses writes writable again: resumes it, or closes and reopens
  // it, which is what a restart would do and drops whatever had not been synced; *reopened
  // tells which (then the caller rebuilds what it keeps in memory from the store). Tries at
  // most every second; in between, and while the disk still fails, answers the error at once.
  virtual Status Heal(bool* reopened) = 0;
};

// Opens or creates a RocksDB store at options.path. kIoError names the path and the cause
// (e.g. "lock held by another process").
Result<std::unique_ptr<Storage>> OpenRocksDbStorage(const StorageOptions& options);

}  // namespace delayq
