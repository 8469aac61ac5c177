#include "cli/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace delayq::cli {

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input,
                         const std::map<std::string, std::string>& env) {
  CommandResult result;
  int in[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    result.error = std::string("cannot create pipes: ") + std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the worker blocks SIGTERM; the command must not
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  // The handler gets the worker's environment without the token: a job's command has no
  // business holding the key to the whole queue server.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string s(*e);
    const std::string name = s.substr(0, s.find('='));
    if (name == "DELAYQ_AUTH_TOKEN") continue;
    if (!env.contains(name)) env_strings.push_back(std::move(s));
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(err[0]);
    result.error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return result;
  }
  // Feed stdin and drain stderr together, so neither side can block the other.
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);
  size_t written = 0;
  bool in_open = true, err_open = true;
  if (input.empty()) {
    ::close(in[1]);
    in_open = false;
  }
  char buf[4096];
  while (in_open || err_open) {
    pollfd fds[2];
    int n = 0;
    if (in_open) fds[n++] = {in[1], POLLOUT, 0};
    if (err_open) fds[n++] = {err[0], POLLIN, 0};
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      if (fds[i].fd == in[1] && (fds[i].revents & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t w = ::write(in[1], input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN) written = input.size();  // it stopped reading
        if (written == input.size()) {
          ::close(in[1]);
          in_open = false;
        }
      } else if (fds[i].fd == err[0] && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t r = ::read(err[0], buf, sizeof(buf));
        if (r <= 0) {
          ::close(err[0]);
          err_open = false;
        } else {
          (void)!::write(STDERR_FILENO, buf, static_cast<size_t>(r));
          result.stderr_tail.append(buf, static_cast<size_t>(r));
          if (result.stderr_tail.size() > 1024) {
            result.stderr_tail.erase(0, result.stderr_tail.size() - 1024);
          }
        }
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace delayq::cli
