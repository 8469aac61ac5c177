// delayq-fuse: a FUSE filesystem for tests that can lose power. The idea is Jepsen's LazyFS:
// kill -9 keeps the page cache, so only a filesystem that forgets what was not fsynced can
// show a missing fsync.
//
//   delayq-fuse BACKING MOUNTPOINT        (foreground; unmount with fusermount3 -u MOUNTPOINT)
//   echo cut    > MOUNTPOINT/.delayq-fuse  power loss: every file reverts to its last synced
//                                          content; creates, renames and unlinks not made durable
//                                          by an fsync of their directory are undone
//   echo enospc > MOUNTPOINT/.delayq-fuse  writes, creates and syncs fail with ENOSPC
//   echo eio    > MOUNTPOINT/.delayq-fuse  writes and syncs fail with EIO
//   echo hold   > MOUNTPOINT/.delayq-fuse  fsyncs wait (as on a slow disk) until "ok", or fail
//                                          with EIO at "eio", "enospc" or "cut": a cut then loses
//                                          every write a held fsync covered, the writes an
//                                          application that answers before its fsync completes has
//                                          already acknowledged. (A process blocked in a held fsync
//                                          cannot die: fail the fsyncs with "eio", kill it, then cut.)
//   echo slow N > MOUNTPOINT/.delayq-fuse  every fsync takes N ms more (a slow disk), or fails
//                                          with EIO if "eio", "enospc" or "cut" comes meanwhile:
//                                          whatever a sync in flight covers is lost by a cut then
//   echo ok     > MOUNTPOINT/.delayq-fuse  back to normal
//
// How it works. BACKING/current holds the files as the application sees them: every operation
// passes through to it at once. BACKING/durable holds what a power loss would leave:
//   - data: a copy of each file's content as of its last fsync (BACKING/durable/<id>), brought
//     up to date by copying only the byte ranges written since (the file's "dirty" ranges);
//   - names: which path names which file, as of the last fsync of each directory (POSIX makes a
//     create or rename durable only then; RocksDB fsyncs its directories for this reason).
// A cut rebuilds BACKING/current from that. The application must not have files open during a
// cut (the tests kill it first). Files are told apart by their inode number in BACKING/current,
// mapped to an id of our own so that a reused inode number cannot inherit another file's data.
//
// Written here because no packaged library simulates power loss: libfuse3 (Debian's
// libfuse3-dev) does the FUSE protocol, this file only the bookkeeping.
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

constexpr const char* kControl = "/.delayq-fuse";

struct State {
  std::string current, durable;  // BACKING/current, BACKING/durable
  int root = -1;                 // BACKING/current, for the *at() calls
  std::atomic<int> fail{0};      // 0, ENOSPC or EIO
  std::mutex hold_mu;            // guards hold and power (fsyncs wait on held)
  std::condition_variable held;
  bool hold = false;
  int64_t slow_ms = 0;  // each fsync waits this long first
  uint64_t power = 0;   // bumped by every cut: an fsync held across one fails
  std::mutex mu;        // guards everything below
  uint64_t next_id = 1;
  std::map<ino_t, uint64_t> ids;                     // inode in current -> file id
  std::map<uint64_t, std::map<off_t, off_t>> dirty;  // id -> [start, end) written since its sync
  std::map<std::string, uint64_t> durable_files;     // durable name -> file id
  std::set<std::string> durable_dirs;                // durable directories ("" is the root)
};
State g;

// "/a/b" -> "a/b"; "/" -> "."
std::string Rel(const char* path) {
  if (path[0] == '/' && path[1] == '\0') return ".";
  return path + 1;
}
// "/a/b" -> "a/b"; "/" -> "" (the key of the durable maps)
std::string Key(const std::string& path) { return path == "/" ? "" : path.substr(1); }
std::string Join(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

uint64_t IdLocked(ino_t ino) {
  auto [it, fresh] = g.ids.try_emplace(ino, 0);
  if (fresh) it->second = g.next_id++;
  return it->second;
}

void MarkDirty(ino_t ino, off_t start, off_t end) {
  if (end <= start) return;
  std::lock_guard lock(g.mu);
  auto& ranges = g.dirty[IdLocked(ino)];
  // Merge with every range it touches.
  auto it = ranges.upper_bound(start);
  if (it != ranges.begin() && std::prev(it)->second >= start) --it;
  while (it != ranges.end() && it->first <= end) {
    start = std::min(start, it->first);
    end = std::max(end, it->second);
    it = ranges.erase(it);
  }
  ranges.emplace(start, end);
}

// Copies what was written to the file since its last sync into its durable copy. The
// application's descriptor may be write-only: the data is read through a descriptor of our own.
int SyncData(int app_fd) {
  struct stat st;
  if (fstat(app_fd, &st) != 0) return -errno;
  const int fd = open(("/proc/self/fd/" + std::to_string(app_fd)).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  std::lock_guard lock(g.mu);
  const uint64_t id = IdLocked(st.st_ino);
  const std::string copy = g.durable + "/" + std::to_string(id);
  int out = open(copy.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (out < 0) return -errno;
  std::vector<char> buf(1 << 20);
  for (auto [start, end] : g.dirty[id]) {
    for (off_t pos = start; pos < end;) {
      ssize_t n =
          pread(fd, buf.data(), static_cast<size_t>(std::min<off_t>(end - pos, static_cast<off_t>(buf.size()))), pos);
      if (n <= 0) break;  // beyond a later truncation
      if (pwrite(out, buf.data(), static_cast<size_t>(n), pos) != n) {
        int e = errno;
        close(out);
        return -e;
      }
      pos += n;
    }
  }
  const int rc = ftruncate(out, st.st_size);
  close(out);
  if (rc != 0) return -errno;
  g.dirty.erase(id);
  return 0;
}

// Makes the names in `dir` (a key) durable as they are now.
int SyncNames(const std::string& dir) {
  DIR* d = opendir((g.current + "/" + (dir.empty() ? "." : dir)).c_str());
  if (!d) return -errno;
  std::map<std::string, uint64_t> files;
  std::set<std::string> dirs;
  {
    std::lock_guard lock(g.mu);
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        dirs.insert(Join(dir, name));
      } else {
        files[Join(dir, name)] = IdLocked(st.st_ino);
      }
    }
    closedir(d);
    auto direct_child = [&](const std::string& path) {
      const std::string prefix = dir.empty() ? "" : dir + "/";
      return path.rfind(prefix, 0) == 0 && path.size() > prefix.size() &&
             path.find('/', prefix.size()) == std::string::npos;
    };
    for (auto it = g.durable_files.begin(); it != g.durable_files.end();) {
      it = direct_child(it->first) && !files.contains(it->first) ? g.durable_files.erase(it) : std::next(it);
    }
    for (auto it = g.durable_dirs.begin(); it != g.durable_dirs.end();) {
      if (direct_child(*it) && !dirs.contains(*it)) {  // gone, with all that was below it
        const std::string below = *it + "/";
        std::erase_if(g.durable_files, [&](const auto& f) { return f.first.rfind(below, 0) == 0; });
        std::erase_if(g.durable_dirs, [&](const std::string& x) { return x != *it && x.rfind(below, 0) == 0; });
        it = g.durable_dirs.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [path, id] : files) g.durable_files[path] = id;
    g.durable_dirs.insert(dirs.begin(), dirs.end());
  }
  return 0;
}

// Power loss: BACKING/current becomes what BACKING/durable says.
void Cut() {
  std::lock_guard lock(g.mu);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(g.current, ec)) fs::remove_all(entry.path(), ec);
  for (const std::string& dir : g.durable_dirs) {  // sorted: parents first
    if (!dir.empty()) fs::create_directories(g.current + "/" + dir, ec);
  }
  std::map<ino_t, uint64_t> ids;
  std::set<uint64_t> kept;
  for (const auto& [path, id] : g.durable_files) {
    const std::string target = g.current + "/" + path;
    const std::string copy = g.durable + "/" + std::to_string(id);
    if (fs::exists(copy)) {
      fs::copy_file(copy, target, fs::copy_options::overwrite_existing, ec);
    } else {
      std::FILE* f = std::fopen(target.c_str(), "w");  // created, never synced: empty
      if (f) std::fclose(f);
    }
    struct stat st;
    if (stat(target.c_str(), &st) == 0) ids[st.st_ino] = id;
    kept.insert(id);
  }
  for (const auto& entry : fs::directory_iterator(g.durable, ec)) {
    const std::string name = entry.path().filename();
    if (!kept.contains(std::strtoull(name.c_str(), nullptr, 10))) fs::remove(entry.path(), ec);
  }
  g.ids = std::move(ids);
  g.dirty.clear();
  std::fprintf(stderr, "delayq-fuse: power cut: %zu files, %zu directories kept\n", g.durable_files.size(),
               g.durable_dirs.size());
}

// Everything present at mount time is durable.
void Adopt() {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(g.current, ec); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), g.current).string();
    if (it->is_directory()) {
      g.durable_dirs.insert(rel);
    } else if (it->is_regular_file()) {
      struct stat st;
      if (stat(it->path().c_str(), &st) != 0) continue;
      const uint64_t id = IdLocked(st.st_ino);
      fs::copy_file(it->path(), g.durable + "/" + std::to_string(id), fs::copy_options::overwrite_existing, ec);
      g.durable_files[rel] = id;
    }
  }
  g.durable_dirs.insert("");
}

int Failing(bool metadata) {
  const int f = g.fail.load();
  if (f == 0) return 0;
  if (metadata && f == EIO) return 0;  // a disk returning EIO still updates directories
  return -f;
}

// Waits while fsyncs are held; false when the power was cut meanwhile (the fsync then fails).
bool WaitWhileHeld() {
  std::unique_lock lock(g.hold_mu);
  const uint64_t power = g.power;
  if (g.slow_ms > 0) {
    g.held.wait_for(lock, std::chrono::milliseconds(g.slow_ms), [&] { return g.power != power; });
  }
  g.held.wait(lock, [&] { return !g.hold || g.power != power; });
  return g.power == power;
}

void SetHold(bool hold, bool cut) {
  std::lock_guard lock(g.hold_mu);
  g.hold = hold;
  if (cut) ++g.power;
  if (!hold && !cut) g.slow_ms = 0;  // "ok": back to normal
  g.held.notify_all();
}

void SetSlow(int64_t ms) {
  std::lock_guard lock(g.hold_mu);
  g.slow_ms = ms;
}

// --- the control file ---
bool IsControl(const char* path) { return path != nullptr && std::strcmp(path, kControl) == 0; }
int Control(const char* buf, size_t size) {
  std::string cmd(buf, size);
  while (!cmd.empty() && (cmd.back() == '\n' || cmd.back() == ' ')) cmd.pop_back();
  if (cmd == "cut") {
    SetHold(false, true);  // the held fsyncs fail: the power went before they were done
    Cut();
  } else if (cmd == "enospc") {
    g.fail = ENOSPC;
    SetHold(false, true);  // a held fsync fails too
  } else if (cmd == "eio") {
    g.fail = EIO;
    SetHold(false, true);
  } else if (cmd == "hold") {
    SetHold(true, false);
  } else if (cmd.rfind("slow ", 0) == 0 && cmd.size() > 5 && cmd.size() < 12 &&
             cmd.find_first_not_of("0123456789", 5) == std::string::npos) {
    SetSlow(std::stoll(cmd.substr(5)));
  } else if (cmd == "ok") {
    g.fail = 0;
    SetHold(false, false);
  } else {
    return -EINVAL;
  }
  std::fprintf(stderr, "delayq-fuse: %s\n", cmd.c_str());
  return static_cast<int>(size);
}

// --- FUSE operations ---
struct File {
  int fd;
  ino_t ino;
};
File* F(fuse_file_info* fi) { return reinterpret_cast<File*>(fi->fh); }

void* Init(fuse_conn_info*, fuse_config* cfg) {
  cfg->use_ino = 1;
  cfg->entry_timeout = 0;  // a cut changes the files under the kernel's feet
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->direct_io = 1;  // no page cache: what the application reads is what we hold
  return nullptr;
}

int GetAttr(const char* path, struct stat* st, fuse_file_info* fi) {
  if (IsControl(path)) {
    std::memset(st, 0, sizeof(*st));
    st->st_mode = S_IFREG | 0666;
    st->st_nlink = 1;
    return 0;
  }
  int rc = fi && fi->fh ? fstat(F(fi)->fd, st) : fstatat(g.root, Rel(path).c_str(), st, AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? 0 : -errno;
}

int Access(const char* path, int mask) {
  if (IsControl(path)) return 0;
  return faccessat(g.root, Rel(path).c_str(), mask, 0) == 0 ? 0 : -errno;
}

int OpenDir(const char* path, fuse_file_info* fi) {
  int fd = openat(g.root, Rel(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -errno;
  }
  fi->fh = reinterpret_cast<uint64_t>(d);
  return 0;
}

int ReadDir(const char*, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info* fi, fuse_readdir_flags) {
  DIR* d = reinterpret_cast<DIR*>(fi->fh);
  rewinddir(d);
  while (dirent* e = readdir(d)) {
    struct stat st {};
    st.st_ino = e->d_ino;
    st.st_mode = static_cast<mode_t>(e->d_type << 12);
    if (fill(buf, e->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0))) break;
  }
  return 0;
}

int ReleaseDir(const char*, fuse_file_info* fi) {
  closedir(reinterpret_cast<DIR*>(fi->fh));
  return 0;
}

int FsyncDir(const char* path, int, fuse_file_info*) {
  if (int f = Failing(false)) return f;
  if (!WaitWhileHeld()) return -EIO;
  return SyncNames(Key(path));
}

int MkDir(const char* path, mode_t mode) {
  if (int f = Failing(true)) return f;
  return mkdirat(g.root, Rel(path).c_str(), mode) == 0 ? 0 : -errno;
}

// The inode losing its last name forgets its id: a later file may get the same number.
void Forget(const std::string& rel) {
  struct stat st;
  if (fstatat(g.root, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_nlink > 1) return;
  std::lock_guard lock(g.mu);
  auto it = g.ids.find(st.st_ino);
  if (it == g.ids.end()) return;
  g.dirty.erase(it->second);
  g.ids.erase(it);
}

int Unlink(const char* path) {
  Forget(Rel(path));
  return unlinkat(g.root, Rel(path).c_str(), 0) == 0 ? 0 : -errno;
}

int RmDir(const char* path) { return unlinkat(g.root, Rel(path).c_str(), AT_REMOVEDIR) == 0 ? 0 : -errno; }

int Rename(const char* from, const char* to, unsigned int flags) {
  if (flags) return -EINVAL;
  if (int f = Failing(true)) return f;
  Forget(Rel(to));
  return renameat(g.root, Rel(from).c_str(), g.root, Rel(to).c_str()) == 0 ? 0 : -errno;
}

int Truncate(const char* path, off_t size, fuse_file_info* fi) {
  if (IsControl(path)) return 0;
  if (int f = Failing(false)) return f;
  int fd = fi && fi->fh ? F(fi)->fd : openat(g.root, Rel(path).c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  fstat(fd, &st);
  int rc = ftruncate(fd, size) == 0 ? 0 : -errno;
  if (rc == 0) MarkDirty(st.st_ino, std::min(size, st.st_size), std::max(size, st.st_size));
  if (!(fi && fi->fh)) close(fd);
  return rc;
}

int Utimens(const char* path, const struct timespec ts[2], fuse_file_info* fi) {
  if (IsControl(path)) return 0;
  int rc = fi && fi->fh ? futimens(F(fi)->fd, ts) : utimensat(g.root, Rel(path).c_str(), ts, AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? 0 : -errno;
}

int Chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  int rc = fi && fi->fh ? fchmod(F(fi)->fd, mode) : fchmodat(g.root, Rel(path).c_str(), mode, 0);
  return rc == 0 ? 0 : -errno;
}

int OpenFile(const char* path, int flags, mode_t mode, fuse_file_info* fi) {
  if (IsControl(path)) {
    fi->fh = 0;
    fi->direct_io = 1;
    return 0;
  }
  int fd = openat(g.root, Rel(path).c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  struct stat st;
  fstat(fd, &st);
  if (flags & O_TRUNC) MarkDirty(st.st_ino, 0, 1);  // the size changed: the next sync records it
  fi->fh = reinterpret_cast<uint64_t>(new File{fd, st.st_ino});
  return 0;
}

int Create(const char* path, mode_t mode, fuse_file_info* fi) {
  if (int f = Failing(true)) return f;
  return OpenFile(path, fi->flags | O_CREAT, mode, fi);
}

int Open(const char* path, fuse_file_info* fi) { return OpenFile(path, fi->flags, 0, fi); }

int Read(const char*, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (!fi->fh) return 0;
  ssize_t n = pread(F(fi)->fd, buf, size, off);
  return n < 0 ? -errno : static_cast<int>(n);
}

int Write(const char* path, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (IsControl(path)) return Control(buf, size);
  if (int f = Failing(false)) return f;
  ssize_t n = pwrite(F(fi)->fd, buf, size, off);
  if (n < 0) return -errno;
  MarkDirty(F(fi)->ino, off, off + n);
  return static_cast<int>(n);
}

int StatFs(const char*, struct statvfs* st) {
  if (fstatvfs(g.root, st) != 0) return -errno;
  if (g.fail.load() == ENOSPC) st->f_bavail = st->f_bfree = 0;
  return 0;
}

int Release(const char*, fuse_file_info* fi) {
  if (fi->fh) {
    close(F(fi)->fd);
    delete F(fi);
  }
  return 0;
}

int Fsync(const char*, int, fuse_file_info* fi) {
  if (!fi->fh) return 0;
  if (int f = Failing(false)) return f;
  if (!WaitWhileHeld()) return -EIO;
  return SyncData(F(fi)->fd);
}

int Fallocate(const char*, int mode, off_t off, off_t len, fuse_file_info* fi) {
  if (int f = Failing(false)) return f;
  struct stat before;
  fstat(F(fi)->fd, &before);
  if (fallocate(F(fi)->fd, mode, off, len) != 0) return -errno;
  struct stat after;
  fstat(F(fi)->fd, &after);
  if (after.st_size != before.st_size) MarkDirty(after.st_ino, before.st_size, after.st_size);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: delayq-fuse BACKING MOUNTPOINT [FUSE options]\n");
    return 2;
  }
  const std::string backing = fs::absolute(argv[1]).string();
  g.current = backing + "/current";
  g.durable = backing + "/durable";
  fs::create_directories(g.current);
  fs::create_directories(g.durable);
  g.root = open(g.current.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g.root < 0) {
    std::perror(g.current.c_str());
    return 1;
  }
  Adopt();
  fuse_operations ops{};
  ops.init = Init;
  ops.getattr = GetAttr;
  ops.access = Access;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.releasedir = ReleaseDir;
  ops.fsyncdir = FsyncDir;
  ops.mkdir = MkDir;
  ops.unlink = Unlink;
  ops.rmdir = RmDir;
  ops.rename = Rename;
  ops.truncate = Truncate;
  ops.utimens = Utimens;
  ops.chmod = Chmod;
  ops.create = Create;
  ops.open = Open;
  ops.read = Read;
  ops.write = Write;
  ops.statfs = StatFs;
  ops.release = Release;
  ops.fsync = Fsync;
  ops.fallocate = Fallocate;
  // argv for fuse_main: program, mountpoint, foreground, then the caller's extra options.
  std::vector<char*> args = {argv[0], argv[2], const_cast<char*>("-f")};
  for (int i = 3; i < argc; ++i) args.push_back(argv[i]);
  std::fprintf(stderr, "delayq-fuse: serving %s over %s\n", argv[2], g.current.c_str());
  return fuse_main(static_cast<int>(args.size()), args.data(), &ops, nullptr);
}
