// Child processes of delayq-check: servers, Redis, workers. Their output (stdout and stderr)
// is copied to a log file by a thread, which also lets the parent wait for a line (readiness is
// read from what the child says, not guessed).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace delayq::check {

class Proc {
 public:
  Proc(std::vector<std::string> args, std::string log_path, std::map<std::string, std::string> env = {});
  ~Proc();  // SIGKILL and reap, if still running
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  // Waits for an output line containing `needle` (seen since the start); false after `timeout`.
  bool WaitForLine(const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void Signal(int sig);
  // Waits for the exit; the exit code, or 128 + signal.
  int Wait();
  // Waits for the exit at most `timeout`; then SIGKILLs it. The exit code, or 128 + signal.
  int WaitOrKill(std::chrono::milliseconds timeout);
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

 private:
  void Drain();

  pid_t pid_ = -1;
  int out_ = -1;
  int exit_code_ = -1;
  std::string log_path_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool eof_ = false;
  std::thread drain_;
};

}  // namespace delayq::check
