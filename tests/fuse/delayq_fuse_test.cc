// delayq-fuse must model power loss as POSIX allows it, or the power-cut checks prove nothing:
// data survives a cut only after an fsync of the file, a new name only after an fsync of its
// directory; ENOSPC and EIO fail writes on command. Needs root and /dev/fuse (CI has both).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void FsyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::fsync(fd), 0) << path;
  ::close(fd);
}

// Writes `text` to path without closing it synced, and optionally fsyncs it.
void Write(const std::string& path, const std::string& text, bool sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  if (sync) {
    ASSERT_EQ(::fsync(fd), 0);
  }
  ::close(fd);
}

class Fuse : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "delayq-fuse-test-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    mnt_ = root_ + "/mnt";
    fs::create_directories(mnt_);
    fs::create_directories(root_ + "/backing/current");
    Write(root_ + "/backing/current/before", "present at mount", false);
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = root_ + "/fuse.log";
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      ::execl(DELAYQ_FUSE_BIN, DELAYQ_FUSE_BIN, (root_ + "/backing").c_str(), mnt_.c_str(), nullptr);
      ::_exit(127);
    }
    // Mounting is asynchronous: wait (bounded) for the control file to appear.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!fs::exists(mnt_ + "/.delayq-fuse") && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(fs::exists(mnt_ + "/.delayq-fuse"))
        << "delayq-fuse did not mount (needs root and /dev/fuse): " << Slurp(root_ + "/fuse.log");
  }
  void TearDown() override {
    if (pid_ > 0) {
      if (std::system(("fusermount3 -u " + mnt_ + " 2>/dev/null").c_str()) != 0) ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    fs::remove_all(root_);
  }
  void Control(const std::string& cmd) {
    std::ofstream control(mnt_ + "/.delayq-fuse");
    control << cmd << "\n";
    control.flush();
    ASSERT_TRUE(control.good()) << cmd;
  }
  std::string P(const std::string& name) const { return mnt_ + "/" + name; }

  std::string root_, mnt_;
  pid_t pid_ = -1;
};

TEST_F(Fuse, APowerCutKeepsOnlyWhatWasFsyncedAndNamedDurably) {
  Write(P("both"), "data and name", true);  // data synced, then the directory: kept
  Write(P("named-only"), "", false);
  FsyncPath(mnt_, O_RDONLY | O_DIRECTORY);           // names every file above durably
  Write(P("both"), "rewritten, not synced", false);  // reverts to the synced content
  {
    std::ofstream(P("named-only")) << "lost";  // the name is durable, this data never was
  }
  Write(P("unsynced"), "never synced", false);  // its name and its data: gone
  Write(P("data-only"), "data synced", true);   // data synced, its name never: gone
  Control("cut");
  EXPECT_FALSE(fs::exists(P("unsynced")));
  EXPECT_FALSE(fs::exists(P("data-only")));
  EXPECT_EQ(Slurp(P("both")), "data and name");
  EXPECT_TRUE(fs::exists(P("named-only")));
  EXPECT_EQ(Slurp(P("named-only")), "");
  EXPECT_EQ(Slurp(P("before")), "present at mount");
}

TEST_F(Fuse, ARenameIsUndoneUnlessItsDirectoryWasSynced) {
  Write(P("a"), "A", true);
  FsyncPath(mnt_, O_RDONLY | O_DIRECTORY);
  fs::rename(P("a"), P("b"));
  Control("cut");
  EXPECT_TRUE(fs::exists(P("a")));
  EXPECT_FALSE(fs::exists(P("b")));
  fs::rename(P("a"), P("c"));
  FsyncPath(mnt_, O_RDONLY | O_DIRECTORY);
  Control("cut");
  EXPECT_FALSE(fs::exists(P("a")));
  EXPECT_EQ(Slurp(P("c")), "A");
}

TEST_F(Fuse, ANewDirectoryNeedsItsParentSynced) {
  fs::create_directories(P("dir"));
  Write(P("dir/f"), "x", true);
  FsyncPath(P("dir"), O_RDONLY | O_DIRECTORY);
  Control("cut");
  EXPECT_FALSE(fs::exists(P("dir")));  // the parent was never synced
  fs::create_directories(P("dir"));
  FsyncPath(mnt_, O_RDONLY | O_DIRECTORY);
  Write(P("dir/f"), "x", true);
  FsyncPath(P("dir"), O_RDONLY | O_DIRECTORY);
  Control("cut");
  EXPECT_EQ(Slurp(P("dir/f")), "x");
}

TEST_F(Fuse, ENOSPCAndEIOFailWritesUntilOk) {
  const int fd = ::open(P("f").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  Control("enospc");
  errno = 0;
  EXPECT_EQ(::write(fd, "x", 1), -1);
  EXPECT_EQ(errno, ENOSPC);
  Control("eio");
  errno = 0;
  // The kernel may cache a write; the fsync after it must report the error either way.
  const bool failed = ::write(fd, "x", 1) == -1 || ::fsync(fd) == -1;
  EXPECT_TRUE(failed);
  EXPECT_EQ(errno, EIO);
  Control("ok");
  EXPECT_EQ(::write(fd, "y", 1), 1);
  EXPECT_EQ(::fsync(fd), 0);
  ::close(fd);
}

// "hold" makes fsyncs wait, as a slow disk does; "ok" lets them finish, and a "cut" while they
// wait fails them and loses what they would have made durable (what an application that answers
// before its fsync completes has already acknowledged).
TEST_F(Fuse, AHeldFsyncWaitsUntilOkAndFailsAtACut) {
  const std::string path = mnt_ + "/held";
  Write(path, "synced before", true);
  FsyncPath(mnt_, O_RDONLY | O_DIRECTORY);  // its name durable too
  Control("hold");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, " then more", 10), 10);
  std::atomic<int> rc{1};
  std::thread syncer([&] { rc = ::fsync(fd); });
  // A measurement window: the fsync must still be waiting after it (it waits for "ok").
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(rc.load(), 1) << "the fsync did not wait while held";
  Control("ok");
  syncer.join();
  EXPECT_EQ(rc.load(), 0);

  Control("hold");
  ASSERT_EQ(::write(fd, " lost", 5), 5);
  std::atomic<int> rc2{1};
  std::thread held([&] { rc2 = ::fsync(fd); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the same window
  EXPECT_EQ(rc2.load(), 1);
  ::close(fd);  // a power cut finds no open file (the tests kill the application first)
  Control("cut");
  held.join();
  EXPECT_EQ(rc2.load(), -1) << "a fsync held across a cut fails";
  EXPECT_EQ(Slurp(path), "synced before then more") << "what the held fsync covered is gone";
}

// "slow N" makes each fsync take N ms more; a cut while one is in flight fails it, and what it
// covered is lost.
TEST_F(Fuse, ASlowFsyncInFlightAtACutFailsAndItsWritesAreLost) {
  const std::string path = mnt_ + "/slow";
  Write(path, "synced", true);
  FsyncPath(mnt_, O_RDONLY | O_DIRECTORY);
  Control("slow 60000");  // far longer than the test: only the cut ends it
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, " lost", 5), 5);
  std::atomic<int> rc{1};
  std::thread syncer([&] { rc = ::fsync(fd); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a measurement window: still in flight
  EXPECT_EQ(rc.load(), 1);
  ::close(fd);
  Control("cut");
  syncer.join();
  EXPECT_EQ(rc.load(), -1);
  EXPECT_EQ(Slurp(path), "synced");
  Control("ok");  // and back to normal: an fsync returns at once
  Write(path, "again", true);
  EXPECT_EQ(Slurp(path), "again");
  EXPECT_EQ(::close(::open((mnt_ + "/.delayq-fuse").c_str(), O_WRONLY)), 0);
}

TEST_F(Fuse, AnUnknownCommandIsRefused) {
  std::ofstream control(P(".delayq-fuse"));
  control << "melt\n";
  control.flush();
  EXPECT_FALSE(control.good());
}

}  // namespace
