// The RocksDB implementation of Storage: one column family per Cf, a shared block cache, and
// writes that reach the WAL unsynced (the engine decides when to SyncWal).
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "storage/storage.h"

namespace delayq {
namespace {

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

// RocksDB counts every key comparison in a thread-local perf context unless told not to; in
// Debian's shared build that thread-local access is a visible share of a memtable insert.
void DisablePerfCounters() {
  thread_local bool done = false;
  if (!done) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    done = true;
  }
}

// The due bucket prefix of a due-index key ("queue \0 bucket(8)"): memtable inserts with the
// same prefix start from where the last one ended (memtable_insert_with_hint_prefix_extractor),
// so the ascending ids within one bucket cost almost nothing to insert.
class DueBucketPrefix final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "delayq.DueBucketPrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return {key.data(), PrefixLength(key)};
  }
  bool InDomain(const rocksdb::Slice& key) const override { return PrefixLength(key) != 0; }

 private:
  static size_t PrefixLength(const rocksdb::Slice& key) {
    const void* nul = std::memchr(key.data(), '\0', key.size());
    if (!nul) return 0;
    size_t len = static_cast<const char*>(nul) - key.data() + 1 + 8;
    return len <= key.size() ? len : 0;
  }
};

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  if (s.IsNotFound()) return Status::NotFound(std::string(what));
  if (s.IsCorruption()) return Status::Corruption(fmt::format("{}: {}", what, s.ToString()));
  return Status::IoError(fmt::format("{}: {}", what, s.ToString()));
}

class RocksBatch final : public WriteBatch {
 public:
  explicit RocksBatch(const std::vector<rocksdb::ColumnFamilyHandle*>* cfs) : cfs_(cfs) {}
  void Put(Cf cf, std::string_view key, std::string_view value) override {
    batch_.Put((*cfs_)[static_cast<int>(cf)], ToSlice(key), ToSlice(value));
  }
  void Delete(Cf cf, std::string_view key) override {
    batch_.Delete((*cfs_)[static_cast<int>(cf)], ToSlice(key));
  }
  size_t Count() const override { return batch_.Count(); }
  size_t ByteSize() const override { return batch_.GetDataSize(); }
  rocksdb::WriteBatch* raw() { return &batch_; }

 private:
  const std::vector<rocksdb::ColumnFamilyHandle*>* cfs_;
  rocksdb::WriteBatch batch_;
};

class RocksCursor final : public Cursor {
 public:
  RocksCursor(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view lower,
              std::string_view upper)
      : upper_(upper) {
    upper_slice_ = ToSlice(upper_);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper_slice_;
    ro.fill_cache = false;  // scans (recovery, refills) must not evict the hot blocks
    it_.reset(db->NewIterator(ro, cf));
    it_->Seek(ToSlice(lower));
  }
  bool Valid() const override { return it_->Valid(); }
  void Next() override { it_->Next(); }
  std::string_view key() const override { return {it_->key().data(), it_->key().size()}; }
  std::string_view value() const override { return {it_->value().data(), it_->value().size()}; }
  Status status() const override { return FromRocks(it_->status(), "scanning the store"); }

 private:
  std::string upper_;
  rocksdb::Slice upper_slice_;
  std::unique_ptr<rocksdb::Iterator> it_;
};

class RocksDbStorage final : public Storage {
 public:
  ~RocksDbStorage() override {
    if (!db_) return;  // Open failed
    for (auto* cf : cfs_) db_->DestroyColumnFamilyHandle(cf);
    db_->Close();
  }

  static Result<std::unique_ptr<Storage>> Open(const StorageOptions& o) {
    std::error_code ec;
    std::filesystem::create_directories(o.path, ec);
    if (ec) {
      return Status::IoError(
          fmt::format("cannot create the data directory {}: {}", o.path, ec.message()));
    }
    rocksdb::Options options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    options.max_background_jobs = 2;
    options.db_write_buffer_size = o.write_buffer_bytes;
    options.max_total_wal_size = 4 * o.write_buffer_bytes;
    options.keep_log_file_num = 4;
    options.max_open_files = 512;
    options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    options.avoid_unnecessary_blocking_io = true;

    auto cache = rocksdb::NewLRUCache(o.block_cache_bytes);
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (int i = 0; i < kCfCount; ++i) {
      auto cf = static_cast<Cf>(i);
      rocksdb::ColumnFamilyOptions cfo(options);
      rocksdb::BlockBasedTableOptions table;
      table.block_cache = cache;
      table.cache_index_and_filter_blocks = true;
      table.pin_l0_filter_and_index_blocks_in_cache = true;
      if (cf == Cf::kJobs || cf == Cf::kKeys) {  // point lookups by id / key
        table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      }
      cfo.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
      cfo.compression = rocksdb::kLZ4Compression;
      if (cf == Cf::kDue) {
        cfo.memtable_insert_with_hint_prefix_extractor = std::make_shared<DueBucketPrefix>();
      }
      cfo.write_buffer_size = std::max<size_t>(8 << 20, o.write_buffer_bytes / 4);
      descriptors.emplace_back(i == 0 ? rocksdb::kDefaultColumnFamilyName : CfName(cf), cfo);
    }
    auto storage = std::unique_ptr<RocksDbStorage>(new RocksDbStorage());
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, o.path, descriptors, &storage->cfs_, &db);
    if (!s.ok()) {
      return Status::IoError(fmt::format(
          "cannot open the store in {}: {}{}", o.path, s.ToString(),
          s.ToString().find("lock") != std::string::npos
              ? " (is another delayq running on this directory?)"
              : ""));
    }
    storage->db_.reset(db);
    return std::unique_ptr<Storage>(std::move(storage));
  }

  std::unique_ptr<WriteBatch> NewBatch() override { return std::make_unique<RocksBatch>(&cfs_); }

  Status Write(WriteBatch& batch) override {
    DisablePerfCounters();
    rocksdb::WriteOptions wo;
    wo.sync = false;
    return FromRocks(db_->Write(wo, static_cast<RocksBatch&>(batch).raw()),
                     "writing to the store");
  }

  Status SyncWal() override { return FromRocks(db_->SyncWAL(), "syncing the write-ahead log"); }

  Status Get(Cf cf, std::string_view key, std::string* value) override {
    DisablePerfCounters();
    rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), cfs_[static_cast<int>(cf)], ToSlice(key), value);
    if (s.IsNotFound()) return Status::NotFound("no such key");
    return FromRocks(s, "reading the store");
  }

  std::vector<Status> MultiGet(Cf cf, const std::vector<std::string>& keys,
                               std::vector<std::string>* values) override {
    DisablePerfCounters();
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::ColumnFamilyHandle*> cfs(keys.size(), cfs_[static_cast<int>(cf)]);
    std::vector<rocksdb::Status> st = db_->MultiGet(rocksdb::ReadOptions(), cfs, slices, values);
    std::vector<Status> out;
    out.reserve(st.size());
    for (const auto& s : st) {
      out.push_back(s.IsNotFound() ? Status::NotFound("no such key") : FromRocks(s, "reading the store"));
    }
    return out;
  }

  std::unique_ptr<Cursor> Scan(Cf cf, std::string_view lower, std::string_view upper) override {
    return std::make_unique<RocksCursor>(db_.get(), cfs_[static_cast<int>(cf)], lower, upper);
  }

  uint64_t DiskBytes() override {
    uint64_t total = 0;
    for (auto* cf : cfs_) {
      uint64_t v = 0;
      if (db_->GetIntProperty(cf, "rocksdb.total-sst-files-size", &v)) total += v;
    }
    uint64_t wal = 0;
    rocksdb::VectorLogPtr files;
    if (db_->GetSortedWalFiles(files).ok()) {
      for (auto& f : files) wal += f->SizeFileBytes();
    }
    return total + wal;
  }

 private:
  RocksDbStorage() = default;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_;
};

}  // namespace

const char* CfName(Cf cf) {
  switch (cf) {
    case Cf::kJobs: return "jobs";
    case Cf::kDue: return "due";
    case Cf::kDead: return "dead";
    case Cf::kKeys: return "keys";
    case Cf::kMeta: return "meta";
  }
  return "unknown";
}

Result<std::unique_ptr<Storage>> OpenRocksDbStorage(const StorageOptions& options) {
  return RocksDbStorage::Open(options);
}

}  // namespace delayq
