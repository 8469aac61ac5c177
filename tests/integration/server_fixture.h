// `delayq serve` started from the built binary on a free loopback port, in a temp directory.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "delayq/client.h"
#include "support/process.h"

namespace delayq::testing {

class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> extra_args = {}, std::string data_dir = "")
      : extra_(std::move(extra_args)) {
    data_ = data_dir.empty() ? dir_.Sub("data") : data_dir;
    Start();
  }
  // A server that died by itself (a crash, a sanitizer's report) is told with its log: the tests
  // then only saw "connection refused".
  ~ServerProcess() {
    if (child_ && child_->pid() > 0 && child_->Exited()) {
      std::cerr << "delayq serve exited by itself with code " << child_->Wait() << "; its log:\n" << log() << "\n";
    }
  }
  ServerProcess(const ServerProcess&) = delete;

  void Start() {
    std::vector<std::string> args = {DELAYQ_BIN, "serve", "--listen", "127.0.0.1:" + std::to_string(port_),
                                     "--data",   data_};
    args.insert(args.end(), extra_.begin(), extra_.end());
    child_ = std::make_unique<Child>(args, dir_.Sub("server.log"));
    std::string line = child_->WaitForLine("delayq serving");
    banner_ = line + "\n" + child_->WaitForLine("try:") + "\n";
    std::smatch m;
    static const std::regex re("https?://127\\.0\\.0\\.1:([0-9]+)");
    if (!std::regex_search(line, m, re)) {
      throw std::runtime_error("delayq serve did not start: " + ReadFile(dir_.Sub("server.log")));
    }
    port_ = std::stoi(m[1]);
    const bool tls = std::find(extra_.begin(), extra_.end(), "--tls-cert") != extra_.end();
    url_ = (tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
  }

  // Starts again on the same port and data directory (after Kill or Stop).
  void Restart() {
    child_.reset();
    Start();
  }
  int Kill() {
    child_->Signal(SIGKILL);
    return child_->Wait();
  }
  int Terminate() {
    child_->Signal(SIGTERM);
    return child_->Wait();
  }

  const std::string& url() const { return url_; }
  pid_t pid() const { return child_->pid(); }
  // What `serve` printed when it started (the serving line and the first try: line).
  const std::string& banner() const { return banner_; }
  // CPU seconds (user + system) the server has used, from /proc/PID/stat.
  double CpuSeconds() const {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid()) + "/stat");
    std::istringstream in(stat.substr(stat.rfind(')') + 2));  // fields after the command name
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) stime = std::stoll(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  int port() const { return port_; }
  std::string log() const { return ReadFile(dir_.Sub("server.log")); }
  std::unique_ptr<Client> NewClient(ClientOptions o = {}) {
    auto c = Client::Connect(url_, o);
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    return std::move(*c);
  }

 private:
  TempDir dir_;
  std::string data_;
  std::vector<std::string> extra_;
  int port_ = 0;
  std::string url_;
  std::unique_ptr<Child> child_;
  std::string banner_;
};

// The requests waiting on a server (waiting reserves, streams and waits for an outcome), as its
// /metrics says; -1 when it cannot say.
inline int64_t OpenWaits(Client& client) {
  auto text = client.Metrics();
  const std::string name = "\ndelayq_reserve_waiting ";
  const size_t at = text.ok() ? text->find(name) : std::string::npos;
  return at == std::string::npos ? -1 : std::stoll(text->substr(at + name.size()));
}

// Whether OpenWaits becomes `n` within 10 s.
inline bool OpenWaitsBecome(Client& client, int64_t n) {
  for (int i = 0; i < 1000; ++i) {
    if (OpenWaits(client) == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a poll of the server's state
  }
  return false;
}

}  // namespace delayq::testing
