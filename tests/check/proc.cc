#include "check/proc.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

extern char** environ;

namespace delayq::check {

Proc::Proc(std::vector<std::string> args, std::string log_path, std::map<std::string, std::string> env)
    : log_path_(std::move(log_path)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string s(*e);
    if (!env.contains(s.substr(0, s.find('=')))) envs.push_back(s);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Its own process group: a signal to the checker (Ctrl-C) does not reach the children first.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const int rc = posix_spawnp(&pid_, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("cannot start " + args[0]);
  }
  out_ = fds[0];
  drain_ = std::thread([this] { Drain(); });
}

Proc::~Proc() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    Wait();
  }
  if (drain_.joinable()) drain_.join();
  if (out_ >= 0) ::close(out_);
}

void Proc::Drain() {
  FILE* log = std::fopen(log_path_.c_str(), "a");
  std::string partial;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(out_, buf, sizeof(buf));
    if (n <= 0) break;
    if (log) {
      std::fwrite(buf, 1, static_cast<size_t>(n), log);
      std::fflush(log);
    }
    partial.append(buf, static_cast<size_t>(n));
    size_t nl;
    std::lock_guard lock(mu_);
    while ((nl = partial.find('\n')) != std::string::npos) {
      if (lines_.size() < 10'000) lines_.push_back(partial.substr(0, nl));
      partial.erase(0, nl + 1);
    }
    cv_.notify_all();
  }
  if (log) std::fclose(log);
  std::lock_guard lock(mu_);
  eof_ = true;
  cv_.notify_all();
}

bool Proc::WaitForLine(const std::string& needle, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  size_t looked = 0;
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    for (; looked < lines_.size(); ++looked) {
      if (lines_[looked].find(needle) != std::string::npos) return true;
    }
    if (eof_) return false;
    if (cv_.wait_until(lock, end) == std::cv_status::timeout) return false;
  }
}

void Proc::Signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int Proc::Wait() {
  if (pid_ <= 0) return exit_code_;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

int Proc::WaitOrKill(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return exit_code_;
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a paced look at a child's exit
  }
  ::kill(pid_, SIGKILL);
  return Wait();
}

}  // namespace delayq::check
