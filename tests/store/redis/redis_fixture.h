// Real Redis servers for tests, on free loopback ports: one node, or a three-master cluster.
// Readiness is read from redis-server's own log line, not guessed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "store/redis/redis_client.h"
#include "support/process.h"

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
  // extra: more redis-server options, e.g. {"--appendonly", "yes"}.
  explicit RedisServer(std::vector<std::string> extra = {}, std::string dir = "")
      : extra_(std::move(extra)), dir_(dir.empty() ? tmp_.path() : dir) {
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
    std::vector<std::string> args = {
        "redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--dir",        dir_,     "--loglevel",          "notice"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    args.insert(args.end(), more.begin(), more.end());
    child_.reset();
    child_ = std::make_unique<Child>(args, tmp_.Sub("redis-stderr.log"));
  }

  TempDir tmp_;
  std::vector<std::string> extra_;
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<Child> child_;
};

// Three masters, no replicas, every slot assigned (redis-cli --cluster create).
class RedisCluster {
 public:
  RedisCluster() {
    for (int i = 0; i < 3; ++i) {
      auto dir = tmp_.Sub("n" + std::to_string(i));
      std::filesystem::create_directories(dir);
      nodes_.push_back(
          std::make_unique<RedisServer>(std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                                                 dir + "/nodes.conf", "--cluster-node-timeout", "5000"},
                                        dir));
    }
    std::vector<std::string> create = {"redis-cli", "--cluster", "create"};
    for (auto& n : nodes_) create.push_back("127.0.0.1:" + std::to_string(n->port()));
    create.insert(create.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    RunResult r = RunProcess(create);
    if (r.exit_code != 0) throw std::runtime_error("redis-cli --cluster create failed: " + r.out + r.err);
    // The nodes agree on the slots within a few gossip rounds; each look is a round trip.
    auto url = redis::RedisUrl::Parse(url_text());
    for (int i = 0; i < 100'000; ++i) {
      bool ok = true;
      for (auto& n : nodes_) {
        RunResult info = RunProcess({"redis-cli", "-p", std::to_string(n->port()), "cluster", "info"});
        ok = ok && info.out.find("cluster_state:ok") != std::string::npos;
      }
      if (ok) return;
    }
    throw std::runtime_error("the Redis cluster never reached cluster_state:ok");
  }
  std::string url_text() const {
    std::string u = "redis-cluster://";
    for (size_t i = 0; i < nodes_.size(); ++i)
      u += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(nodes_[i]->port());
    return u;
  }

 private:
  TempDir tmp_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace delayq::testing
