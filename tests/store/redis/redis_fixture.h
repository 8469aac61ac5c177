// Real Redis servers for tests, on free loopback ports: one node, or a three-master cluster.
// Readiness is read from redis-server's own log line, not guessed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "store/redis/redis_client.h"
#include "support/process.h"
#include "support/test_certs.h"

namespace delayq::testing {

// A port p for a cluster node: p and its cluster bus port p + 10000 both free (and valid).
inline int FreeClusterPort() {
  static std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int p = 20000 + static_cast<int>(rng() % 25000);
    bool free = true;
    for (int port : {p, p + 10000}) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port));
      free = free && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      ::close(fd);
    }
    if (free) return p;
  }
  throw std::runtime_error("no free port pair for a Redis cluster node");
}

class RedisServer {
 public:
  // extra: more redis-server options, e.g. {"--appendonly", "yes"}. With `tls`, it serves TLS only
  // (--port 0 --tls-port PORT; the TLS files go in `extra`).
  explicit RedisServer(std::vector<std::string> extra = {}, std::string dir = "", bool tls = false)
      : extra_(std::move(extra)), dir_(dir.empty() ? tmp_.path() : dir), tls_(tls) {
    const bool cluster = std::find(extra_.begin(), extra_.end(), "--cluster-enabled") != extra_.end();
    port_ = cluster ? FreeClusterPort() : FreeTcpPort();
    Start();
  }
  // Starts redis-server and waits until it serves (after loading its data).
  void Start(const std::vector<std::string>& more = {}) {
    Spawn(more);
    WaitLoaded();
  }
  // Starts redis-server and returns once it accepts connections, possibly still loading its
  // data (then every command but a few answers LOADING). WaitLoaded() waits for the rest.
  void StartLoading(const std::vector<std::string>& more) {
    Spawn(more);
    if (child_->WaitForLine("Server initialized").empty()) {
      throw std::runtime_error("redis-server did not start on port " + std::to_string(port_));
    }
  }
  void WaitLoaded() {
    if (child_->WaitForLine("Ready to accept connections").empty()) {
      throw std::runtime_error("redis-server did not get ready on port " + std::to_string(port_));
    }
  }
  int Kill() {
    child_->Signal(SIGKILL);
    return child_->Wait();
  }
  void Restart() {
    child_.reset();
    Start();
  }
  int port() const { return port_; }
  pid_t pid() const { return child_->pid(); }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }

 private:
  void Spawn(const std::vector<std::string>& more) {
    std::vector<std::string> args = {"redis-server"};
    if (tls_) {
      args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_)});
    } else {
      args.insert(args.end(), {"--port", std::to_string(port_)});
    }
    args.insert(args.end(),
                {"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir_, "--loglevel", "notice"});
    args.insert(args.end(), extra_.begin(), extra_.end());
    args.insert(args.end(), more.begin(), more.end());
    child_.reset();
    child_ = std::make_unique<Child>(args, tmp_.Sub("redis-stderr.log"));
  }

  TempDir tmp_;
  std::vector<std::string> extra_;
  std::string dir_;
  bool tls_ = false;
  int port_ = 0;
  std::unique_ptr<Child> child_;
};

// Three masters, no replicas, every slot assigned (redis-cli --cluster create). With a password,
// every node requires it (requirepass and masterauth).
class RedisCluster {
 public:
  explicit RedisCluster(std::string password = "") : password_(std::move(password)) {
    for (int i = 0; i < 3; ++i) {
      auto dir = tmp_.Sub("n" + std::to_string(i));
      std::filesystem::create_directories(dir);
      std::vector<std::string> extra = {"--cluster-enabled",      "yes", "--cluster-config-file", dir + "/nodes.conf",
                                        "--cluster-node-timeout", "5000"};
      if (!password_.empty()) extra.insert(extra.end(), {"--requirepass", password_, "--masterauth", password_});
      nodes_.push_back(std::make_unique<RedisServer>(extra, dir));
    }
    std::vector<std::string> create = {"redis-cli", "--cluster", "create"};
    for (auto& n : nodes_) create.push_back("127.0.0.1:" + std::to_string(n->port()));
    create.insert(create.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    const std::map<std::string, std::string> env =
        password_.empty() ? std::map<std::string, std::string>{}
                          : std::map<std::string, std::string>{{"REDISCLI_AUTH", password_}};
    RunResult r = RunProcess(create, env);
    if (r.exit_code != 0) throw std::runtime_error("redis-cli --cluster create failed: " + r.out + r.err);
    // The nodes agree on the slots within a few gossip rounds; each look is a round trip.
    for (int i = 0; i < 100'000; ++i) {
      bool ok = true;
      for (auto& n : nodes_) {
        RunResult info = RunProcess({"redis-cli", "-p", std::to_string(n->port()), "cluster", "info"}, env);
        ok = ok && info.out.find("cluster_state:ok") != std::string::npos;
      }
      if (ok) return;
    }
    throw std::runtime_error("the Redis cluster never reached cluster_state:ok");
  }
  std::string url_text() const {
    std::string u = password_.empty() ? "redis-cluster://" : "redis-cluster://:" + password_ + "@";
    for (size_t i = 0; i < nodes_.size(); ++i)
      u += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(nodes_[i]->port());
    return u;
  }

 private:
  std::string password_;
  TempDir tmp_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

// A Redis Sentinel on a free port, watching `master_name` at 127.0.0.1:master_port (quorum 2,
// down after 1 s).
class RedisSentinel {
 public:
  RedisSentinel(const std::string& master_name, int master_port, std::vector<std::string> more = {})
      : port_(FreeTcpPort()) {
    const std::string conf = tmp_.Sub("sentinel.conf");
    std::ofstream out(conf);
    out << "port " << port_ << "\nbind 127.0.0.1\ndir " << tmp_.path() << "\n"
        << "sentinel monitor " << master_name << " 127.0.0.1 " << master_port << " 2\n"
        << "sentinel down-after-milliseconds " << master_name << " 1000\n"
        << "sentinel failover-timeout " << master_name << " 4000\n"
        << "sentinel parallel-syncs " << master_name << " 1\n";
    for (const auto& line : more) out << line << "\n";
    out.close();
    // redis-server in Sentinel mode: the same binary as redis-sentinel, without another package.
    child_ =
        std::make_unique<Child>(std::vector<std::string>{"redis-server", conf, "--sentinel"}, tmp_.Sub("sentinel.log"));
    if (child_->WaitForLine("+monitor master").empty()) {
      throw std::runtime_error("redis-sentinel did not start on port " + std::to_string(port_) + ": " +
                               ReadFile(tmp_.Sub("sentinel.log")));
    }
  }
  int port() const { return port_; }

 private:
  TempDir tmp_;
  int port_;
  std::unique_ptr<Child> child_;
};

}  // namespace delayq::testing
