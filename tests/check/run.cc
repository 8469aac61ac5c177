#include "check/run.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "check/history.h"
#include "check/proc.h"
#include "check/worker.h"
#include "delayq/client.h"
#include "support/process.h"

namespace delayq::check {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kQueues = {"chk.a", "chk.b", "chk.c"};
constexpr int64_t kLongestLeaseMs = 4000;  // what the workers ask for at most

void SleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// " (all acknowledged within 35 ms before a fault; lost writes also caused 3 lease)" for a
// mode that loses writes by design.
std::string LossEffects(const Report& r) {
  std::vector<std::string> parts;
  if (r.lost > 0) parts.push_back(fmt::format("all acknowledged within {:.0f} ms before a fault", r.lost_window_ms));
  std::string effects;
  for (const auto& [kind, n] : r.loss_effects) {
    if (kind == "lost" || kind == "resurrected") continue;
    effects += fmt::format("{}{} {}", effects.empty() ? "lost writes also caused " : ", ", n, kind);
  }
  if (!effects.empty()) parts.push_back(effects);
  return parts.empty() ? "" : " (" + Join(parts, "; ") + ")";
}

std::string FakeTimeLibrary() {
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"}) {
    if (fs::exists(p)) return p;
  }
  return "";
}

// Reads what the workers append to their history files: new whole lines only, each file from
// where the last look ended.
class HistoryTail {
 public:
  template <typename Fn>
  void ForNewLines(const std::vector<std::string>& paths, Fn&& fn) {
    for (const std::string& path : paths) {
      File& f = files_[path];
      std::ifstream in(path, std::ios::binary);
      if (!in) continue;
      in.seekg(f.offset);
      std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      f.offset += static_cast<std::streamoff>(chunk.size());
      f.partial += chunk;
      size_t start = 0, nl;
      while ((nl = f.partial.find('\n', start)) != std::string::npos) {
        fn(path, std::string_view(f.partial).substr(start, nl - start));
        start = nl + 1;
      }
      f.partial.erase(0, start);
    }
  }

 private:
  struct File {
    std::streamoff offset = 0;
    std::string partial;  // a line not yet whole
  };
  std::map<std::string, File> files_;
};

// Watches for a write (an enqueue, ack or cancel) answered ok at or after a moment: the moment a
// power cut hurts most. A store that answers a write only once its fsync is done has made it
// durable by then; one that answers before has the fsync still to do or in flight (on a slow
// disk, for as long as the disk takes), and a cut now loses the write it acknowledged.
class AcknowledgedWriteWatch {
 public:
  // Starts from what the files hold now: only writes answered from here on count.
  void Skip(const std::vector<std::string>& paths) {
    tail_.ForNewLines(paths, [&](const std::string& path, std::string_view line) { Note(path, line, INT64_MAX); });
  }
  // Whether a write was answered ok at or after `since_us` in what was appended since.
  bool Seen(const std::vector<std::string>& paths, int64_t since_us) {
    bool seen = false;
    tail_.ForNewLines(
        paths, [&](const std::string& path, std::string_view line) { seen = Note(path, line, since_us) || seen; });
    return seen;
  }

 private:
  bool Note(const std::string& path, std::string_view line, int64_t since_us) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("k") || !j.contains("c") || !j.contains("n")) return false;
    const std::string key = fmt::format("{}:{}:{}", path, j["c"].dump(), j["n"].dump());
    if (j["k"] == "b") {
      const std::string op = j.value("op", "");
      if (op == "enqueue" || op == "ack" || op == "cancel") writes_.insert(key);
      return false;
    }
    if (j["k"] != "e" || writes_.erase(key) == 0) return false;
    return j.value("code", "") == "ok" && j.value("t", int64_t{0}) >= since_us;
  }
  HistoryTail tail_;
  std::set<std::string> writes_;  // begun, not yet answered
};

// Counts the deliveries the workers have recorded so far (the reserve answers in their history
// files), reading only what was appended since the last look: what a run needs to have seen
// before it can end.
class TrafficMeter {
 public:
  int64_t Deliveries(const std::vector<std::string>& paths) {
    tail_.ForNewLines(paths, [&](const std::string&, std::string_view line) { Count(line); });
    return deliveries_;
  }

 private:
  void Count(std::string_view line) {
    if (line.find("\"k\":\"e\"") == std::string_view::npos) return;  // only answers carry deliveries
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("r") || !j["r"].is_object()) return;
    const Json& r = j["r"];
    if (r.contains("d") && r["d"].is_array()) deliveries_ += static_cast<int64_t>(r["d"].size());
  }
  HistoryTail tail_;
  int64_t deliveries_ = 0;
};

class Run {
 public:
  explicit Run(const RunOptions& o) : o_(o), rng_(o.seed) {
    if (!o_.keep.empty()) {
      root_ = o_.keep;
      if (fs::exists(root_ + "/mnt")) {  // a run that was killed left its filesystem mounted
        Proc umount({"fusermount3", "-u", "-z", root_ + "/mnt"}, "/dev/null");
        umount.Wait();
      }
      fs::remove_all(root_);
      fs::create_directories(root_);
    } else {
      std::string tmpl = (fs::temp_directory_path() / "delayq-check-XXXXXX").string();
      root_ = ::mkdtemp(tmpl.data());
    }
    faults_ = std::make_unique<Recorder>(root_ + "/faults.jsonl");
  }

  ~Run() {
    workers_.clear();
    servers_.clear();
    redis_.clear();
    pg_.reset();
    standby_.reset();
    if (fuse_) {
      Proc umount({"fusermount3", "-u", Mount()}, root_ + "/fuse.log");
      umount.Wait();
      fuse_->Wait();
    }
    if (o_.keep.empty() && !keep_) fs::remove_all(root_);
  }

  RunResult Go() {
    if (DiskFault()) MountFuse();
    StartStore();
    for (int i = 0; i < Servers(); ++i) StartServer(i);
    SetUpQueues();
    const int64_t start = WallUs();
    until_us_ = start + MaxDurationMs() * 1000;  // the workers' own stop, should this process die
    for (int i = 0; i < o_.clients; ++i) StartWorker(i == 0);
    Nemesis(start);
    const int64_t traffic_ms = (WallUs() - start) / 1000;
    StopWorkers();
    FinalState final_state = Settle();
    std::vector<std::string> paths = histories_;
    paths.push_back(root_ + "/faults.jsonl");
    History history = ReadHistory(paths);

    VerifyOptions vo;
    vo.loss_expected = LossExpected(o_);
    vo.clock_steps = o_.fault == "clock-step";
    vo.unsynced_leases = o_.store == "embedded";
    vo.killed_clients = killed_;
    RunResult r;
    r.report = Verify(history, final_state, vo);
    r.faults_injected = injected_;
    r.mode = Mode();
    for (const Op& op : history.ops) {
      if (op.op == "enqueue" && op.ok()) r.acknowledged += static_cast<int64_t>(op.result["jobs"].size());
    }
    r.traffic_ms = traffic_ms;
    r.enough_traffic = EnoughTraffic();
    r.pass = r.report.anomalies.empty() && final_state.settled && r.enough_traffic;
    if (!r.pass) keep_ = true;
    const Report& rep = r.report;
    r.verdict = fmt::format(
        "delayq-check {} {}: {} ops ({} in doubt, {} errors answered), {} jobs, {} deliveries, {} faults, "
        "{} anomalies, {} lost, {} resurrected{}; lateness p50 {:.0f} ms p99 {:.0f} ms max {:.0f} ms ({} samples){}",
        r.pass ? "PASS" : "FAIL", r.mode, rep.ops, rep.in_doubt, rep.errors, rep.jobs, rep.deliveries, injected_,
        rep.anomalies.size(), rep.lost, rep.resurrected, LossEffects(rep), rep.lateness_p50_ms, rep.lateness_p99_ms,
        rep.lateness_max_ms, rep.lateness_samples, final_state.settled ? "" : "; the store never settled");
    r.verdict += fmt::format("; traffic ran {:.1f} s", traffic_ms / 1e3);
    if (!r.enough_traffic) {
      r.verdict += fmt::format(
          "; too little traffic to judge: {} deliveries (needs {}) and {} faults (needs {}) by the {:.0f} s cap",
          deliveries_seen_, o_.min_deliveries, injected_, MinFaults(), MaxDurationMs() / 1e3);
    }
    if (keep_ || !o_.keep.empty()) r.verdict += "; history in " + root_;
    return r;
  }

 private:
  int Servers() const { return o_.store == "embedded" ? 1 : o_.servers; }

  // --- the filesystem that can lose power (delayq-fuse) ---
  bool DiskFault() const { return o_.fault == "power-cut" || o_.fault == "disk-full" || o_.fault == "disk-error"; }
  std::string Mount() const { return root_ + "/mnt"; }
  void MountFuse() {
    if (o_.fuse_bin.empty()) throw std::runtime_error("this build has no delayq-fuse");
    fs::create_directories(Mount());
    fuse_ = std::make_unique<Proc>(std::vector<std::string>{o_.fuse_bin, root_ + "/fuse-backing", Mount()},
                                   root_ + "/fuse.log");
    // Mounted once the control file answers (a paced poll: the mount is the kernel's doing).
    for (int i = 0; i < 300 && !fs::exists(Mount() + "/.delayq-fuse"); ++i) SleepMs(20);
    if (!fs::exists(Mount() + "/.delayq-fuse")) {
      throw std::runtime_error("delayq-fuse did not mount (FUSE needs root and /dev/fuse); see " + root_ + "/fuse.log");
    }
  }
  void FuseControl(const std::string& command) {
    std::ofstream control(Mount() + "/.delayq-fuse");
    control << command << "\n";
    control.flush();
    if (!control) throw std::runtime_error("delayq-fuse refused the command " + command);
  }
  std::string Mode() const {
    std::string m = o_.store == "embedded" ? "embedded/" + o_.durability : o_.store;
    if (o_.store == "redis" &&
        (o_.fault == "redis-restart" || o_.fault == "redis-failover" || o_.fault == "power-cut")) {
      m += "/appendfsync=" + o_.redis_appendfsync;
    }
    if (o_.redis_wait_replicas > 0) m += fmt::format("/wait={}", o_.redis_wait_replicas);
    if (Servers() > 1) m += fmt::format("/{}-servers", Servers());
    return m + " fault=" + o_.fault;
  }
  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // --- the store ---
  // mkdir, then fsync the parent so that the directory's name survives a power cut.
  static void CreateDurableDirectory(const std::string& dir) {
    if (fs::exists(dir)) return;
    fs::create_directories(dir);
    FsyncDirectory(fs::path(dir).parent_path().string());
  }
  static void FsyncDirectory(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    const bool ok = fd >= 0 && ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok) throw std::runtime_error("cannot fsync the directory " + dir);
  }
  std::unique_ptr<Proc> StartRedis(const std::string& name, int port, const std::vector<std::string>& more) {
    const std::string dir = (DiskFault() ? Mount() : root_) + "/" + name;
    CreateDurableDirectory(dir);  // as an installation would: Redis's own files are then its business
    std::vector<std::string> args = {
        "redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
        "--dir",        dir,      "--loglevel",         "notice"};
    args.insert(args.end(), more.begin(), more.end());
    auto p = std::make_unique<Proc>(args, root_ + "/" + name + ".log");
    if (!p->WaitForLine("Ready to accept connections", std::chrono::seconds(60))) {
      throw std::runtime_error("redis-server " + name + " did not start; see " + p->log_path());
    }
    // Redis 7.0 creates DIR/appendonlydir without an fsync of DIR, so a power cut in the first
    // seconds of a new Redis loses its whole AOF (ext4 commits the name within ~5 s; a strict
    // filesystem never does). That is Redis's, not delayq's: make it durable, as time would.
    FsyncDirectory(dir);
    return p;
  }

  std::vector<std::string> RedisPersistence() const {
    return {"--appendonly", "yes", "--appendfsync", o_.redis_appendfsync};
  }

  void StartStore() {
    if (o_.store == "embedded") return;
    if (o_.store == "postgres") {
      pg_port_ = testing::FreeTcpPort();
      InitPostgres();
      pg_ = StartPostgres(PgDir() + "/data", pg_port_, o_.fault == "pg-failover");
      if (o_.fault == "pg-failover") StartPgStandby();
      store_url_ = fmt::format("postgres://postgres@127.0.0.1:{}/postgres", pg_port_);
      return;
    }
    if (o_.store == "redis") {
      redis_ports_ = {testing::FreeTcpPort()};
      redis_.push_back(StartRedis("redis0", redis_ports_[0], RedisPersistence()));
      if (o_.fault == "redis-failover") {
        redis_ports_.push_back(testing::FreeTcpPort());
        redis_.push_back(StartReplica(1, redis_ports_[0]));
      }
      store_url_ = fmt::format("redis://127.0.0.1:{}", redis_ports_[0]);
      return;
    }
    // redis-cluster: three masters, every slot assigned.
    std::vector<std::string> create = {"redis-cli", "--cluster", "create"};
    for (int i = 0; i < 3; ++i) {
      int port;
      do {
        port = static_cast<int>(Uniform(20000, 45000));
      } while (!PortFree(port) || !PortFree(port + 10000));
      redis_ports_.push_back(port);
      redis_.push_back(
          StartRedis(fmt::format("node{}", i), port,
                     {"--cluster-enabled", "yes", "--cluster-config-file", root_ + fmt::format("/node{}/nodes.conf", i),
                      "--cluster-node-timeout", "5000", "--appendonly", "yes"}));
      create.push_back(fmt::format("127.0.0.1:{}", port));
    }
    create.insert(create.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    Proc cli(create, root_ + "/cluster-create.log");
    if (cli.Wait() != 0) throw std::runtime_error("redis-cli --cluster create failed; see " + root_);
    for (int i = 0; i < 600; ++i) {
      bool ok = true;
      for (int port : redis_ports_) {
        Proc info({"redis-cli", "-p", std::to_string(port), "cluster", "info"}, root_ + "/cluster-info.log");
        ok = ok && info.WaitForLine("cluster_state:ok", std::chrono::seconds(2));
        info.Wait();
      }
      if (ok) break;
      SleepMs(100);  // gossip rounds: a poll of a condition, paced
    }
    store_url_ = "redis-cluster://";
    for (size_t i = 0; i < redis_ports_.size(); ++i) {
      store_url_ += (i ? "," : "") + fmt::format("127.0.0.1:{}", redis_ports_[i]);
    }
  }

  static bool PortFree(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
  }

  std::unique_ptr<Proc> StartReplica(int index, int primary_port) {
    const std::string name = fmt::format("redis{}", index);
    fs::remove_all(root_ + "/" + name);  // a fresh copy, taken from the primary
    std::vector<std::string> more = RedisPersistence();
    more.insert(more.end(), {"--replicaof", "127.0.0.1", std::to_string(primary_port)});
    auto p = StartRedis(name, redis_ports_[static_cast<size_t>(index)], more);
    if (!p->WaitForLine("MASTER <-> REPLICA sync: Finished with success", std::chrono::seconds(60))) {
      throw std::runtime_error("the Redis replica did not sync; see " + p->log_path());
    }
    return p;
  }

  // --- PostgreSQL: run as the postgres user when this runs as root (initdb refuses root) ---
  std::vector<std::string> AsPostgresUser(std::vector<std::string> args) const {
    if (::geteuid() != 0) return args;
    std::vector<std::string> out = {"setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups", "--"};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }
  std::string PgDir() const { return root_ + "/pg"; }
  void InitPostgres() {
    fs::create_directories(PgDir());
    if (::geteuid() == 0) {
      ::chmod(root_.c_str(), 0755);  // the postgres user goes through it to its own directory
      Proc own({"chown", "postgres:postgres", PgDir()}, root_ + "/pg-init.log");
      own.Wait();
    }
    Proc init(AsPostgresUser({std::string(kPgBin) + "initdb", "-D", PgDir() + "/data", "-A", "trust", "-U", "postgres",
                              "--no-sync"}),
              root_ + "/pg-init.log");
    if (init.Wait() != 0) throw std::runtime_error("initdb failed; see " + root_ + "/pg-init.log");
  }
  // PostgreSQL as shipped (fsync and synchronous_commit on): a crash may lose nothing acknowledged.
  // `synchronous`: a commit also waits until the standby named "standby" has it.
  std::unique_ptr<Proc> StartPostgres(const std::string& data, int port, bool synchronous = false,
                                      const std::string& ready = "database system is ready to accept connections") {
    std::vector<std::string> args = {std::string(kPgBin) + "postgres",
                                     "-D",
                                     data,
                                     "-p",
                                     std::to_string(port),
                                     "-k",
                                     PgDir(),
                                     "-c",
                                     "listen_addresses=127.0.0.1",
                                     "-c",
                                     "max_connections=300"};
    if (synchronous) args.insert(args.end(), {"-c", "synchronous_standby_names=standby"});
    auto p = std::make_unique<Proc>(AsPostgresUser(args), root_ + fmt::format("/postgres-{}.log", port));
    if (!p->WaitForLine(ready, std::chrono::seconds(60))) {
      throw std::runtime_error("PostgreSQL did not start; see " + p->log_path());
    }
    return p;
  }
  // One value from the server on `port` (psql -tA), "" when it answered none or failed.
  static std::string Psql(int port, const std::string& sql) {
    auto r = testing::RunProcess(
        {"psql", "-qtA", "-h", "127.0.0.1", "-p", std::to_string(port), "-U", "postgres", "-d", "postgres", "-c", sql});
    std::string out = r.out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }
  // A streaming standby of the primary on pg_port_, named "standby" (so synchronous commits wait
  // for it), taken by pg_basebackup; returns once the primary sees it streaming.
  void StartPgStandby() {
    standby_port_ = testing::FreeTcpPort();
    standby_dir_ = PgDir() + fmt::format("/standby-{}", standby_port_);
    Proc base(AsPostgresUser({std::string(kPgBin) + "pg_basebackup", "-h", "127.0.0.1", "-p", std::to_string(pg_port_),
                              "-U", "postgres", "-D", standby_dir_, "-R", "-X", "stream", "--no-sync"}),
              root_ + "/pg-basebackup.log");
    if (base.Wait() != 0) throw std::runtime_error("pg_basebackup failed; see " + root_ + "/pg-basebackup.log");
    std::ofstream(standby_dir_ + "/postgresql.auto.conf", std::ios::app) << fmt::format(
        "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name=standby'\n", pg_port_);
    standby_ = StartPostgres(standby_dir_, standby_port_, false, "started streaming WAL");
    for (int i = 0; i < 600; ++i) {
      if (Psql(pg_port_,
               "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'standby' AND "
               "state = 'streaming'") == "1") {
        return;
      }
      SleepMs(50);  // a poll of the primary's view, paced
    }
    throw std::runtime_error("the PostgreSQL standby did not stream; see " + root_);
  }
  // Ends every connection delayq has to the database (pg_terminate_backend), as an administrator
  // or a failing network would.
  void TerminateDelayqConnections() {
    Proc psql({"psql", "-q", "-h", "127.0.0.1", "-p", std::to_string(pg_port_), "-U", "postgres", "-d", "postgres",
               "-c", "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'delayq'"},
              root_ + "/pg-terminate.log");
    psql.Wait();
  }
  static constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin/";

  // --- servers ---
  void StartServer(int i) {
    if (server_ports_.size() <= static_cast<size_t>(i)) server_ports_.push_back(testing::FreeTcpPort());
    std::vector<std::string> args = {o_.delayq_bin, "serve",
                                     "--listen",    fmt::format("127.0.0.1:{}", server_ports_[static_cast<size_t>(i)]),
                                     "--data",      DataDir(i)};
    if (o_.store == "embedded") {
      args.insert(args.end(), {"--durability", o_.durability});
    } else {
      args.insert(args.end(), {"--store", store_url_});
    }
    if (o_.redis_wait_replicas > 0) {
      args.insert(args.end(), {"--redis-wait-replicas", std::to_string(o_.redis_wait_replicas)});
    }
    std::map<std::string, std::string> env;
    if (o_.fault == "clock-step") {
      const std::string lib = FakeTimeLibrary();
      if (lib.empty()) throw std::runtime_error("clock-step needs libfaketime (Debian package faketime)");
      if (!fs::exists(FakeTimeFile())) SetFakeTime("+0");
      env = {{"LD_PRELOAD", lib},
             {"FAKETIME_TIMESTAMP_FILE", FakeTimeFile()},
             {"FAKETIME_NO_CACHE", "1"},
             {"DONT_FAKE_MONOTONIC", "1"}};
    }
    if (servers_.size() <= static_cast<size_t>(i)) servers_.resize(static_cast<size_t>(i) + 1);
    servers_[static_cast<size_t>(i)].reset();
    auto p = std::make_unique<Proc>(args, root_ + fmt::format("/server{}.log", i), env);
    if (!p->WaitForLine("delayq serving", std::chrono::seconds(120))) {
      throw std::runtime_error(fmt::format("delayq serve did not start; see {}", p->log_path()));
    }
    servers_[static_cast<size_t>(i)] = std::move(p);
  }
  std::string DataDir(int i) const { return (DiskFault() ? Mount() : root_) + fmt::format("/data{}", i); }
  std::string Url(int i) const { return fmt::format("http://127.0.0.1:{}", server_ports_[static_cast<size_t>(i)]); }
  std::string FakeTimeFile() const { return root_ + "/faketime"; }
  void SetFakeTime(const std::string& offset) {
    std::ofstream(FakeTimeFile() + ".tmp") << offset << "\n";
    fs::rename(FakeTimeFile() + ".tmp", FakeTimeFile());
  }

  std::unique_ptr<Client> NewClient(int server = 0) {
    auto c = Client::Connect(Url(server), {.timeout_ms = WorkerOptions::kAnswerWithinMs});
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    return std::move(*c);
  }

  void SetUpQueues() {
    auto c = NewClient();
    for (const auto& q : kQueues) {
      QueueConfig config;
      config.max_attempts = StartConfig::kMaxAttempts;
      config.lease_ms = StartConfig::kLeaseMs;
      config.backoff.base_ms = 200;
      config.backoff.max_ms = 3000;
      config.backoff.jitter = 0.2;
      config.keep_completed_ms = StartConfig::KeepCompletedMs(q);
      Status s = c->SetConfig(q, config);
      if (!s.ok()) throw std::runtime_error("setting up queue " + q + ": " + s.ToString());
    }
  }

  // --- workers ---
  void StartWorker(bool admin) {
    const int id = next_worker_++;
    std::vector<std::string> urls;
    for (int i = 0; i < Servers(); ++i) urls.push_back(Url(i));
    const std::string history = root_ + fmt::format("/history{}.jsonl", id);
    histories_.push_back(history);
    std::vector<std::string> args = {o_.self_bin,  "--worker",
                                     "--id",       std::to_string(id),
                                     "--seed",     std::to_string(o_.seed * 1000 + static_cast<uint64_t>(id)),
                                     "--urls",     Join(urls, ","),
                                     "--queues",   Join(kQueues, ","),
                                     "--history",  history,
                                     "--until-us", std::to_string(until_us_)};
    if (admin) args.push_back("--admin");
    workers_[id] = std::make_unique<Proc>(args, root_ + fmt::format("/worker{}.log", id));
    if (admin) admin_ = id;
  }

  void StopWorkers() {
    for (auto& [id, w] : workers_) w->Signal(SIGTERM);
    for (auto& [id, w] : workers_) {
      // A worker ends its request in flight first: at most a long poll and its answer deadline.
      // One that does not by then is killed, and its request in flight is in doubt.
      const int code = w->WaitOrKill(std::chrono::milliseconds(WorkerOptions::kAnswerWithinMs + 10'000));
      if (code != 0) {
        std::cerr << fmt::format("worker {} exited with {}; see {}\n", id, code, w->log_path());
        if (code == 128 + SIGKILL) killed_.push_back(id);
      }
    }
  }

  // --- faults ---
  void Fault(const std::string& name, int64_t t0) {
    faults_->Line({{"k", "f"}, {"name", name}, {"t0", t0}, {"t1", WallUs()}});
    ++injected_;
  }

  // --- the run's length: by traffic, capped ---
  int64_t MaxDurationMs() const {
    return o_.max_duration_ms > 0 ? o_.max_duration_ms : std::max(4 * o_.duration_ms, o_.duration_ms + 90'000);
  }
  int64_t MinFaults() const { return o_.fault == "none" ? 0 : o_.min_faults; }
  bool EnoughTraffic() {
    deliveries_seen_ = meter_.Deliveries(histories_);
    return deliveries_seen_ >= o_.min_deliveries && injected_ >= MinFaults();
  }

  // Injects a fault every fault_every_ms (with jitter) while the traffic runs; ends the run once
  // it lasted duration_ms and saw enough traffic, at least half a fault interval after the last
  // fault (so the store is judged after it recovered), or at the cap.
  void Nemesis(int64_t start_us) {
    const int64_t min_end = start_us + o_.duration_ms * 1000;
    const int64_t cap = start_us + MaxDurationMs() * 1000;
    const int64_t quiet_us = o_.fault_every_ms * 500;
    auto gap = [&] {
      const int64_t jitter = o_.fault_every_ms / 5;
      return (o_.fault_every_ms + Uniform(-jitter, jitter)) * 1000;
    };
    int round = 0;
    int64_t next_fault = o_.fault == "none" ? INT64_MAX : start_us + gap();
    int64_t last_fault_end = start_us;
    while (true) {
      const int64_t now = WallUs();
      if (now >= cap) return;
      const bool done = now >= min_end && EnoughTraffic();
      if (done && (injected_ == 0 || now - last_fault_end >= quiet_us)) return;
      // No new fault once the run could end: the quiet time after it would only prolong the run.
      if (!done && now >= next_fault && now + quiet_us < cap) {
        Inject(round++);
        last_fault_end = WallUs();
        next_fault = last_fault_end + gap();
        continue;
      }
      const int64_t until = std::min({next_fault, cap, now + 200'000});
      SleepMs(std::max<int64_t>(1, (until - now) / 1000));  // paced: the traffic is the workers'
    }
  }

  void Inject(int round) {
    const int64_t t0 = WallUs();
    const std::string& f = o_.fault;
    if (f == "kill-server") {
      const int i = static_cast<int>(Uniform(0, Servers() - 1));
      servers_[static_cast<size_t>(i)]->Signal(SIGKILL);
      servers_[static_cast<size_t>(i)]->Wait();
      StartServer(i);
      Fault("kill-server", t0);
    } else if (f == "kill-consumers") {
      std::vector<int> mixed;
      for (auto& [id, w] : workers_) {
        if (id != admin_) mixed.push_back(id);
      }
      const int victim = mixed[static_cast<size_t>(Uniform(0, static_cast<int64_t>(mixed.size()) - 1))];
      workers_[victim]->Signal(SIGKILL);
      workers_[victim]->Wait();
      workers_.erase(victim);
      killed_.push_back(victim);
      StartWorker(false);
      Fault("kill-consumer", t0);
    } else if (f == "stop-server") {
      const int i = static_cast<int>(Uniform(0, Servers() - 1));
      servers_[static_cast<size_t>(i)]->Signal(SIGSTOP);
      SleepMs(kLongestLeaseMs + 2000);  // longer than any lease: they all run out meanwhile
      servers_[static_cast<size_t>(i)]->Signal(SIGCONT);
      Fault("stop-server", t0);
    } else if (f == "redis-restart") {
      redis_[0]->Signal(SIGKILL);
      redis_[0]->Wait();
      redis_[0] = StartRedis("redis0", redis_ports_[0], RedisPersistence());
      Fault("redis-restart", t0);
    } else if (f == "pg-restart") {
      // PostgreSQL crashes (SIGQUIT: pg_ctl stop -m immediate, no checkpoint) and comes back,
      // recovering from its WAL.
      pg_->Signal(SIGQUIT);
      pg_->Wait();
      pg_ = StartPostgres(PgDir() + "/data", pg_port_);
      Fault("pg-restart", t0);
    } else if (f == "pg-failover") {
      // The primary dies; its synchronous standby (every acknowledged commit is on it) is
      // promoted; delayq is pointed at it, as a deployment's failover would; a new standby is
      // taken from it, and commits wait for that one from then on.
      pg_->Signal(SIGKILL);
      pg_->Wait();
      Proc promote(AsPostgresUser({std::string(kPgBin) + "pg_ctl", "promote", "-w", "-D", standby_dir_}),
                   root_ + "/pg-promote.log");
      if (promote.Wait() != 0) throw std::runtime_error("pg_ctl promote failed; see " + root_ + "/pg-promote.log");
      pg_ = std::move(standby_);
      pg_port_ = standby_port_;
      store_url_ = fmt::format("postgres://postgres@127.0.0.1:{}/postgres", pg_port_);
      for (int i = 0; i < Servers(); ++i) {
        servers_[static_cast<size_t>(i)]->Signal(SIGKILL);
        servers_[static_cast<size_t>(i)]->Wait();
        StartServer(i);
      }
      StartPgStandby();
      Psql(pg_port_, "ALTER SYSTEM SET synchronous_standby_names = 'standby'");
      Psql(pg_port_, "SELECT pg_reload_conf()");
      Fault("pg-failover", t0);
    } else if (f == "pg-terminate") {
      TerminateDelayqConnections();
      Fault("pg-terminate", t0);
    } else if (f == "redis-failover") {
      // The replica falls half a second behind (replication lag, as under load or over a slow
      // link); the primary dies; the replica takes over; delayq is pointed at it (as a
      // Sentinel-aware deployment would be); the old primary returns as the new replica.
      redis_[1]->Signal(SIGSTOP);
      SleepMs(500);
      redis_[0]->Signal(SIGKILL);
      redis_[0]->Wait();
      redis_[1]->Signal(SIGCONT);
      Proc promote({"redis-cli", "-p", std::to_string(redis_ports_[1]), "replicaof", "no", "one"},
                   root_ + "/failover.log");
      promote.Wait();
      std::swap(redis_[0], redis_[1]);
      std::swap(redis_ports_[0], redis_ports_[1]);
      store_url_ = fmt::format("redis://127.0.0.1:{}", redis_ports_[0]);
      for (int i = 0; i < Servers(); ++i) {
        servers_[static_cast<size_t>(i)]->Signal(SIGKILL);
        servers_[static_cast<size_t>(i)]->Wait();
        StartServer(i);
      }
      redis_[1] = StartReplica(1, redis_ports_[0]);
      Fault("redis-failover", t0);
    } else if (f == "power-cut") {
      // The machine loses power: the process dies and every write it did not fsync is gone. It
      // goes where it hurts: the disk turns slow first (each fsync takes kSlowFsyncMs more), so
      // when the power goes a sync is in flight and the writes it covers are lost, every time:
      // whatever a store acknowledged before its fsync completed shows as lost (a cut at a
      // random moment caught an answer-before-fsync defect about once in 13 cuts). The fsyncs
      // in flight fail first (and every write after them, so nothing more becomes durable; a
      // process blocked in one could not die), then the server is killed and the power cut.
      // The cut comes right after a write answered once the disk turned slow (an fsync begun
      // before that may still be fast), or after kSlowDiskMs if none was.
      write_watch_.Skip(histories_);
      FuseControl(fmt::format("slow {}", kSlowFsyncMs));
      const int64_t slow_from = WallUs();
      while (WallUs() < slow_from + kSlowDiskMs * 1000 &&
             !write_watch_.Seen(histories_, slow_from + kSlowFsyncMs * 1000)) {
        SleepMs(1);
      }
      FuseControl("eio");
      Proc& victim = o_.store == "embedded" ? *servers_[0] : *redis_[0];
      victim.Signal(SIGKILL);
      victim.Wait();
      FuseControl("cut");
      FuseControl("ok");
      if (o_.store == "embedded") {
        StartServer(0);
      } else {
        redis_[0] = StartRedis("redis0", redis_ports_[0], RedisPersistence());
      }
      Fault("power-cut", t0);
    } else if (f == "disk-full" || f == "disk-error") {
      FuseControl(f == "disk-full" ? "enospc" : "eio");
      SleepMs(2000);
      FuseControl("ok");
      Fault(f, t0);
    } else if (f == "clock-step") {
      const bool forward = round % 2 == 0;
      SetFakeTime(forward ? "+1h" : "-1h");
      SleepMs(3000);
      SetFakeTime("+0");
      Fault(forward ? "clock+1h" : "clock-1h", t0);
    } else {
      throw std::runtime_error("fault " + f + " is not available in this build");
    }
  }

  // --- the end ---
  // Resumes every queue, waits until nothing is reserved and nothing is due soon, then reads
  // every job the history names, the stats and /metrics.
  // Everything here has one deadline (kSettleBudgetUs): a store that drops answers makes the run
  // end "never settled", not hang on requests that are never answered.
  FinalState Settle() {
    FinalState out;
    auto c = NewClient();
    const int64_t budget_end = WallUs() + kSettleBudgetUs;
    for (const auto& q : kQueues) {
      for (int i = 0; i < 50 && WallUs() < budget_end && !c->Resume(q).ok(); ++i) SleepMs(200);
    }
    const int64_t settle_until = std::min(budget_end, WallUs() + 30'000'000);
    bool settled = false;
    while (!settled && WallUs() < settle_until) {
      settled = true;
      for (const auto& q : kQueues) {
        auto s = c->Stats(q);
        settled = settled && s.ok() && s->reserved == 0 && s->due_next_60s == 0;
      }
      if (!settled) SleepMs(250);  // leases run out and jobs come due: paced polling
    }
    out.settled = settled;
    auto counts = [&](std::map<std::string, QueueCounts>* into) {
      for (const auto& q : kQueues) {
        auto s = c->Stats(q);
        if (s.ok()) (*into)[q] = {s->scheduled, s->ready, s->reserved, s->dead, s->completed};
      }
    };
    counts(&out.stats);
    std::vector<std::string> paths = histories_;
    History h = ReadHistory(paths);
    std::set<std::pair<std::string, std::string>> ids;
    for (const Op& op : h.ops) {
      if (op.op == "enqueue" && op.ok()) {
        for (const Json& j : op.result["jobs"]) ids.insert({op.queue, j["id"]});
      } else if (op.op == "reserve" && op.ok()) {
        for (const Json& d : op.result["d"]) ids.insert({op.queue, d["id"]});
      } else if ((op.op == "reschedule" || op.op == "get") && op.ok()) {
        ids.insert({op.queue, op.result["id"]});
      }
    }
    for (const auto& [q, id] : ids) {
      FinalJob f;
      Result<Job> job = Status::Unavailable("");
      for (int i = 0; i < 20 && WallUs() < budget_end; ++i) {
        job = c->Get(q, JobRef::ById(id));
        if (job.ok() || job.code() == Code::kNotFound) break;
        SleepMs(100);
      }
      if (job.ok()) {
        f.found = true;
        f.state = JobStateName(job->state);
        f.key = job->key;
        f.attempt = job->attempt;
        f.result = job->result;
      } else if (job.code() != Code::kNotFound) {
        out.settled = false;
      }
      out.jobs[id] = f;
    }
    std::map<std::string, QueueCounts> again;
    counts(&again);
    if (again != out.stats) out.settled = false;
    auto metrics = c->Metrics();
    if (metrics.ok()) {
      static const std::regex re(R"re(delayq_jobs\{queue="([^"]+)",state="([a-z]+)"\} (\d+))re");
      for (std::sregex_iterator it(metrics->begin(), metrics->end(), re), end; it != end; ++it) {
        QueueCounts& qc = out.metrics[(*it)[1]];
        const std::string state = (*it)[2];
        const int64_t n = std::stoll((*it)[3]);
        (state == "scheduled"   ? qc.scheduled
         : state == "ready"     ? qc.ready
         : state == "reserved"  ? qc.reserved
         : state == "completed" ? qc.completed
                                : qc.dead) = n;
      }
    }
    return out;
  }

  static constexpr int64_t kSettleBudgetUs = 90'000'000;
  // A power cut comes kSlowDiskMs after the disk turned slow (kSlowFsyncMs more per fsync): below
  // the 500 ms of loss an `interval` store may show, which must stay within its bound.
  static constexpr int64_t kSlowFsyncMs = 40;
  static constexpr int64_t kSlowDiskMs = 300;

  const RunOptions o_;
  std::mt19937_64 rng_;
  std::string root_;
  bool keep_ = false;
  std::unique_ptr<Recorder> faults_;
  std::unique_ptr<Proc> fuse_;
  std::vector<std::unique_ptr<Proc>> redis_;
  std::vector<int> redis_ports_;
  std::unique_ptr<Proc> pg_, standby_;
  int pg_port_ = 0, standby_port_ = 0;
  std::string standby_dir_;
  std::string store_url_;
  std::vector<std::unique_ptr<Proc>> servers_;
  std::vector<int> server_ports_;
  std::map<int, std::unique_ptr<Proc>> workers_;
  std::vector<std::string> histories_;
  std::vector<int> killed_;
  int next_worker_ = 0;
  int admin_ = -1;
  int64_t until_us_ = 0;
  int64_t injected_ = 0;
  TrafficMeter meter_;
  AcknowledgedWriteWatch write_watch_;  // times the power cuts
  int64_t deliveries_seen_ = 0;
};

}  // namespace

bool LossExpected(const RunOptions& o) {
  if (o.fault == "redis-failover") return o.redis_wait_replicas == 0;
  if (o.fault == "power-cut") {
    return o.store == "embedded" ? o.durability != "sync" : o.redis_appendfsync != "always";
  }
  return false;
}

RunResult RunCheck(const RunOptions& options) {
  Run run(options);
  return run.Go();
}

}  // namespace delayq::check
