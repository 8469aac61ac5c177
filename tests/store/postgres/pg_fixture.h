// A real PostgreSQL 15 for tests: initdb in a temporary directory and `postgres` on a free
// loopback port, run as the `postgres` user when the tests run as root (initdb refuses root),
// through setpriv, which execs (so a signal to the child is a signal to the server). Readiness is
// asked of the server (PQping), not guessed.
#pragma once

#include <libpq-fe.h>
#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace delayq::testing {

inline constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin/";

class PostgresServer {
 public:
  // extra: more server settings, e.g. {"-c", "synchronous_commit=off"}. Crash-safety settings
  // stay as PostgreSQL ships them unless `fast` (fsync off: a process crash loses nothing, only
  // an OS crash would, and tests never crash the OS).
  explicit PostgresServer(std::vector<std::string> extra = {}, bool fast = true)
      : extra_(std::move(extra)), fast_(fast), port_(FreeTcpPort()) {
    data_ = tmp_.Sub("data");
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr)
        throw std::runtime_error("running as root needs the postgres user (apt install postgresql-15)");
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      if (::chown(tmp_.path().c_str(), uid_, gid_) != 0) throw std::runtime_error("cannot chown " + tmp_.path());
    }
    auto init = RunProcess(AsServerUser({std::string(kPgBin) + "initdb", "-D", data_, "-A", "trust", "-U", "postgres",
                                         "--no-sync", "--encoding=UTF8", "--locale=C"}));
    if (init.exit_code != 0) throw std::runtime_error("initdb failed: " + init.err);
    Start();
  }
  ~PostgresServer() { Stop(SIGINT); }
  PostgresServer(const PostgresServer&) = delete;

  void Start() {
    std::vector<std::string> args = {std::string(kPgBin) + "postgres", "-D", data_, "-p", std::to_string(port_), "-k",
                                     tmp_.path(), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
                                     // WAL recycled past 64 MB instead of the default gigabyte:
                                     // each test's directory stays small
                                     "-c", "max_wal_size=64MB", "-c", "min_wal_size=32MB"};
    if (fast_) args.insert(args.end(), {"-c", "fsync=off", "-c", "full_page_writes=off"});
    args.insert(args.end(), extra_.begin(), extra_.end());
    child_ = std::make_unique<Child>(AsServerUser(args), tmp_.Sub("postgres.log"));
    const std::string conninfo = url("postgres");
    for (int i = 0; i < 600; ++i) {
      if (PQping(conninfo.c_str()) == PQPING_OK) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a process start, not a test's sync
    }
    throw std::runtime_error("PostgreSQL did not start; its log: " + ReadFile(tmp_.Sub("postgres.log")));
  }
  // Stops the server: SIGINT is a fast shutdown, SIGQUIT or SIGKILL a crash (pg_ctl -m immediate).
  void Stop(int signal = SIGINT) {
    if (!child_) return;
    child_->Signal(signal);
    child_->Wait();
    child_.reset();
  }
  void Crash() { Stop(SIGQUIT); }
  int port() const { return port_; }
  std::string url(const std::string& db) const {
    return "postgres://postgres@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }
  // A new empty database; its URL.
  std::string NewDatabase() {
    static std::atomic<int> n{0};
    const std::string name = "dq" + std::to_string(::getpid()) + "_" + std::to_string(n++);
    Psql("postgres", "CREATE DATABASE " + name);
    return url(name);
  }
  // Runs SQL as the superuser; throws on failure.
  std::string Psql(const std::string& db, const std::string& sql) const {
    PGconn* c = PQconnectdb(url(db).c_str());
    PGresult* r = PQexec(c, sql.c_str());
    const auto st = PQresultStatus(r);
    std::string out = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    std::string err = PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) throw std::runtime_error(sql + ": " + err);
    return out;
  }
  const std::string& dir() const { return tmp_.path(); }
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  // CPU seconds (user + system) the server's processes have used: the postmaster's and those of
  // its backends alive now (/proc/PID/stat), as a store's CPU includes its database's.
  double CpuSeconds() const {
    double total = 0;
    const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = ReadFile(entry.path().string() + "/stat");
      const size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream in(stat.substr(close + 2));
      std::string field;
      long long ppid = 0, utime = 0, stime = 0;
      for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i == 4) ppid = std::stoll(field);
        if (i == 14) utime = std::stoll(field);
        if (i == 15) stime = std::stoll(field);
      }
      if (std::stoll(name) == pid() || ppid == pid()) total += static_cast<double>(utime + stime) / tick;
    }
    return total;
  }

 private:
  std::vector<std::string> AsServerUser(std::vector<std::string> args) const {
    if (::geteuid() != 0) return args;
    std::vector<std::string> out = {"setpriv", "--reuid=" + std::to_string(uid_), "--regid=" + std::to_string(gid_),
                                    "--clear-groups", "--"};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  TempDir tmp_;
  std::vector<std::string> extra_;
  bool fast_ = true;
  int port_ = 0;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string data_;
  std::unique_ptr<Child> child_;
};

// One server for every test of this process (started on first use), stopped and its directory
// removed at exit. ctest runs each test in a process of its own: a server left behind by each
// would fill the disk (a data directory grows to over a gigabyte).
inline PostgresServer& SharedPostgres() {
  static PostgresServer* server = new PostgresServer();
  static const bool removed_at_exit = [] {
    std::atexit([] {
      delete server;
      server = nullptr;
    });
    return true;
  }();
  (void)removed_at_exit;
  return *server;
}

}  // namespace delayq::testing
