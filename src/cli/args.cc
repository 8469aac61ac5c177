// The CLI's shared argument parsing: durations, timestamps, a job by id or key.
#include <iterator>

#include "cli/cli_common.h"
#include "core/duration.h"

namespace delayq::cli {

// Parses "30m" style durations for CLI11 options, with the duration parser's message.
int64_t Duration(const std::string& option, const std::string& text) {
  auto d = ParseDuration(text);
  if (!d.ok()) throw CLI::ValidationError(option, d.status().message());
  return *d;
}

// --at: RFC 3339, or epoch milliseconds.
int64_t Timestamp(const std::string& option, const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() < 16) {
    return std::stoll(text);
  }
  auto t = ParseTimestamp(text);
  if (!t.ok()) throw CLI::ValidationError(option, t.status().message());
  return *t;
}

std::string ReadAll(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void JobArgs::Add(CLI::App* c) {
  c->add_option("queue", queue, "Queue name")->required();
  c->add_option("id", id, "Job id");
  c->add_option("--key", key, "Address the job by its idempotency key instead of its id");
}

Result<JobRef> JobArgs::Ref() const {
  if (id.empty() == key.empty()) return Status::InvalidArgument("give a job id or --key KEY (one of them)");
  return id.empty() ? JobRef::ByKey(key) : JobRef::ById(id);
}

}  // namespace delayq::cli
