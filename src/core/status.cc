#include <array>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {
namespace {

constexpr std::array<std::string_view, 12> kCodeNames = {
    "ok",          "invalid_argument", "not_found",  "conflict", "lease_expired",  "too_large", "resource_exhausted",
    "unavailable", "io_error",         "corruption", "internal", "unauthenticated"};

}  // namespace

std::string_view CodeName(Code code) {
  DELAYQ_DCHECK(static_cast<size_t>(code) < kCodeNames.size(), "CodeName of a code that is none of Code's");
  return kCodeNames[static_cast<size_t>(code)];
}

Code CodeFromName(std::string_view name) {
  for (size_t i = 0; i < kCodeNames.size(); ++i) {
    if (kCodeNames[i] == name) return static_cast<Code>(i);
  }
  return Code::kInternal;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kScheduled: return "scheduled";
    case JobState::kReady: return "ready";
    case JobState::kReserved: return "reserved";
    case JobState::kDead: return "dead";
    case JobState::kCompleted: return "completed";
    case JobState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kScheduled, JobState::kReady, JobState::kReserved, JobState::kDead, JobState::kCompleted,
                     JobState::kCancelled}) {
    if (name == JobStateName(s)) return s;
  }
  return std::nullopt;
}

}  // namespace delayq
