// The RocksDB implementation of Storage: one column family per Cf, a shared block cache, and
// writes that reach the WAL unsynced (the engine decides when to SyncWal).
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstring>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>

#include "store/embedded/storage.h"

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
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override { return {key.data(), PrefixLength(key)}; }
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
  void Delete(Cf cf, std::string_view key) override { batch_.Delete((*cfs_)[static_cast<int>(cf)], ToSlice(key)); }
  size_t Count() const override { return batch_.Count(); }
  size_t ByteSize() const override { return batch_.GetDataSize(); }
  rocksdb::WriteBatch* raw() { return &batch_; }

 private:
  const std::vector<rocksdb::ColumnFamilyHandle*>* cfs_;
  rocksdb::WriteBatch batch_;
};

class RocksCursor final : public Cursor {
 public:
  RocksCursor(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view lower, std::string_view upper)
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

// RocksDB's messages go to delayq's log. Its default logger writes a LOG file into the data
// directory, and after a write to that file failed (a full disk) the next message trips an
// assertion in Debian's RocksDB build (WritableFileWriter::AssertFalseAndGetStatusForPrevError),
// which aborted the server; found by delayq-check's disk-full mode.
class SpdlogLogger final : public rocksdb::Logger {
 public:
  SpdlogLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override { Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap); }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      spdlog::error("rocksdb: {}", buf);
    } else {
      spdlog::warn("rocksdb: {}", buf);
    }
  }
};

// Creates `path` and its missing parents, fsyncing the directory above each one it creates: a
// new directory's name is durable only then (POSIX), and RocksDB syncs the directories inside
// the store but not the one holding it. Without this a power loss soon after the first start
// could take the whole store with it (found by delayq-check's power-cut mode).
Status CreateDurableDirectory(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::absolute(path, ec).lexically_normal();
  std::vector<fs::path> missing;
  for (fs::path p = target; !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IoError(
          fmt::format("cannot create the data directory {}: {}", it->string(), std::strerror(errno)));
    }
    const int fd = ::open(it->parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int e = errno;
      if (fd >= 0) ::close(fd);
      return Status::IoError(
          fmt::format("cannot sync the directory {}: {}", it->parent_path().string(), std::strerror(e)));
    }
    ::close(fd);
  }
  return Status::Ok();
}

class RocksDbStorage final : public Storage {
 public:
  ~RocksDbStorage() override { CloseDb(); }

  static Result<std::unique_ptr<Storage>> Open(const StorageOptions& o) {
    DELAYQ_RETURN_IF_ERROR(CreateDurableDirectory(o.path));
    auto storage = std::unique_ptr<RocksDbStorage>(new RocksDbStorage(o));
    DELAYQ_RETURN_IF_ERROR(storage->OpenDb());
    return std::unique_ptr<Storage>(std::move(storage));
  }

  std::unique_ptr<WriteBatch> NewBatch() override { return std::make_unique<RocksBatch>(&cfs_); }

  Status Write(WriteBatch& batch) override {
    DisablePerfCounters();
    if (!Healthy()) return BrokenStatus();
    rocksdb::WriteOptions wo;
    wo.sync = false;
    return Failed(db_->Write(wo, static_cast<RocksBatch&>(batch).raw()), "writing to the store");
  }

  Status SyncWal() override {
    std::shared_lock lock(db_mu_);  // the one call made outside the engine's lock: not during a reopen
    if (!Healthy()) return BrokenStatus();
    return Failed(db_->SyncWAL(), "syncing the write-ahead log");
  }

  Status Get(Cf cf, std::string_view key, std::string* value) override {
    DisablePerfCounters();
    if (!db_) return BrokenStatus();
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cfs_[static_cast<int>(cf)], ToSlice(key), value);
    if (s.IsNotFound()) return Status::NotFound("no such key");
    return FromRocks(s, "reading the store");
  }

  std::vector<Status> MultiGet(Cf cf, const std::vector<std::string>& keys, std::vector<std::string>* values) override {
    DisablePerfCounters();
    values->assign(keys.size(), std::string());  // one value per key, whatever happens
    if (!db_) return std::vector<Status>(keys.size(), BrokenStatus());
    // The batched form (one column family, arrays): it looks the keys up together in the
    // memtables and in each SST file's blocks, where the vector form does one Get per key —
    // reading the records was 23 % of an in-process reserve + ack (docs/performance.md).
    const size_t n = keys.size();
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::PinnableSlice> pinned(n);
    std::vector<rocksdb::Status> st(n);
    db_->MultiGet(rocksdb::ReadOptions(), cfs_[static_cast<int>(cf)], n, slices.data(), pinned.data(), st.data());
    std::vector<Status> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (st[i].ok()) (*values)[i].assign(pinned[i].data(), pinned[i].size());
      out.push_back(st[i].IsNotFound() ? Status::NotFound("no such key") : FromRocks(st[i], "reading the store"));
    }
    return out;
  }

  std::unique_ptr<Cursor> Scan(Cf cf, std::string_view lower, std::string_view upper) override {
    if (!db_) return std::make_unique<FailedCursor>(BrokenStatus());
    return std::make_unique<RocksCursor>(db_.get(), cfs_[static_cast<int>(cf)], lower, upper);
  }

  uint64_t DiskBytes() override {
    std::shared_lock lock(db_mu_);
    if (!db_) return 0;
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

  bool Healthy(Status* why = nullptr) const override {
    if (!broken_.load(std::memory_order_acquire)) return true;
    if (why) {
      std::lock_guard lock(broken_mu_);
      *why = broken_status_;
    }
    return false;
  }

  // RocksDB answers a failed write with a "background error" and refuses writes until
  // DB::Resume() clears it; a failed WAL write it takes as fatal, which only closing and
  // reopening the database clears. Heal tries one, then the other.
  Status Heal(bool* reopened) override {
    *reopened = false;
    if (Healthy()) return Status::Ok();
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(broken_mu_);
      if (now < next_heal_) return broken_status_;
      next_heal_ = now + kHealEvery;
    }
    if (db_ && db_->Resume().ok()) {
      Recovered("resumed");
      return Status::Ok();
    }
    std::unique_lock lock(db_mu_);
    CloseDb();
    Status opened = OpenDb();
    if (!opened.ok()) {
      std::lock_guard guard(broken_mu_);
      spdlog::warn("the store at {} cannot write again yet: {}", o_.path, opened.message());
      return broken_status_;
    }
    *reopened = true;
    Recovered("reopened: what was not synced is gone, as after a restart");
    return Status::Ok();
  }

 private:
  static constexpr auto kHealEvery = std::chrono::seconds(1);

  // A cursor over nothing, for a store whose database failed to reopen.
  class FailedCursor final : public Cursor {
   public:
    explicit FailedCursor(Status s) : s_(std::move(s)) {}
    bool Valid() const override { return false; }
    void Next() override {}
    std::string_view key() const override { return {}; }
    std::string_view value() const override { return {}; }
    Status status() const override { return s_; }

   private:
    Status s_;
  };

  explicit RocksDbStorage(const StorageOptions& o) : o_(o), cache_(rocksdb::NewLRUCache(o.block_cache_bytes)) {}

  Status OpenDb() {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    options.max_background_jobs = 2;
    options.db_write_buffer_size = o_.write_buffer_bytes;
    options.max_total_wal_size = 4 * o_.write_buffer_bytes;
    options.keep_log_file_num = 4;
    options.max_open_files = 512;
    options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    options.info_log = std::make_shared<SpdlogLogger>();
    options.avoid_unnecessary_blocking_io = true;

    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (int i = 0; i < kCfCount; ++i) {
      auto cf = static_cast<Cf>(i);
      rocksdb::ColumnFamilyOptions cfo(options);
      rocksdb::BlockBasedTableOptions table;
      table.block_cache = cache_;
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
      cfo.write_buffer_size = std::max<size_t>(8 << 20, o_.write_buffer_bytes / 4);
      descriptors.emplace_back(i == 0 ? rocksdb::kDefaultColumnFamilyName : CfName(cf), cfo);
    }
    rocksdb::DB* db = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> cfs;
    rocksdb::Status s = rocksdb::DB::Open(options, o_.path, descriptors, &cfs, &db);
    if (!s.ok()) {
      return Status::IoError(fmt::format(
          "cannot open the store in {}: {}{}", o_.path, s.ToString(),
          s.ToString().find("lock") != std::string::npos ? " (is another delayq running on this directory?)" : ""));
    }
    db_.reset(db);
    cfs_ = std::move(cfs);
    return Status::Ok();
  }

  // Closes the database. The handles become null, not gone: a batch planned while the store is
  // closed (it is never written: Write answers the error) still finds a slot for each family.
  void CloseDb() {
    if (!db_) return;
    for (auto*& cf : cfs_) {
      db_->DestroyColumnFamilyHandle(cf);
      cf = nullptr;
    }
    db_->Close();
    db_.reset();
  }

  Status BrokenStatus() {
    std::lock_guard lock(broken_mu_);
    return broken_status_.ok() ? Status::IoError("the store is closed") : broken_status_;
  }

  Status Failed(const rocksdb::Status& s, std::string_view what) {
    if (s.ok()) return Status::Ok();
    Status out =
        s.IsNoSpace() || s.ToString().find("No space left") != std::string::npos
            ? Status::IoError(fmt::format("the disk under the store is full ({}: {}); nothing was written, and writes "
                                          "resume by themselves once there is space",
                                          what, s.ToString()))
            : FromRocks(s, what);
    if (out.code() == Code::kIoError) {
      std::lock_guard lock(broken_mu_);
      if (Healthy()) {
        spdlog::error("the store at {} stopped writing: {}", o_.path, out.message());
        broken_status_ = out;
        next_heal_ = std::chrono::steady_clock::now() + kHealEvery;
      }
      broken_.store(true, std::memory_order_release);
    }
    return out;
  }

  void Recovered(const char* how) {
    std::lock_guard lock(broken_mu_);
    spdlog::info("the store at {} writes again ({}; it had stopped on: {})", o_.path, how, broken_status_.message());
    broken_status_ = Status::Ok();
    broken_.store(false, std::memory_order_release);
  }

  const StorageOptions o_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_mutex db_mu_;  // exclusive while Heal reopens the database
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_;
  std::atomic<bool> broken_{false};
  mutable std::mutex broken_mu_;  // guards the two below
  Status broken_status_;
  std::chrono::steady_clock::time_point next_heal_;
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
