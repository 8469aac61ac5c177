// Runs a command for `delayq work`: the job's payload on its stdin, the job's fields in its
// environment (the worker's own, less DELAYQ_AUTH_TOKEN); its stdout and stderr pass through,
// and the end of its stderr is kept.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace delayq::cli {

struct CommandResult {
  int exit_status = 0;      // 0..255, or 128 + signal when killed by one
  std::string stderr_tail;  // the last KiB the command wrote to stderr
  std::string error;        // set when the command could not be started
};

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input,
                         const std::map<std::string, std::string>& env);

}  // namespace delayq::cli
