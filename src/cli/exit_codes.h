// The CLI's exit codes: the one table mapping outcomes to exit statuses (the HTTP twin is
// http::HttpStatusOf). Scripts can tell "not found" from "bad input" from "unreachable".
#pragma once

#include "delayq/status.h"

namespace delayq::cli {

enum ExitCode {
  kExitOk = 0,
  kExitFailure = 1,      // the server or store failed, or anything not below
  kExitBadInput = 2,     // bad command line or rejected input (HTTP 400, 413)
  kExitNotFound = 3,     // no such job or queue (HTTP 404)
  kExitConflict = 4,     // the job's state forbids it, or the receipt is stale (HTTP 409)
  kExitUnreachable = 5,  // the server cannot be reached or is unavailable (HTTP 503)
  kExitAuth = 6,         // the server wants a (different) bearer token (HTTP 401)
  kExitOverloaded = 7,   // the server refused for load (HTTP 429)
  kExitNoOutcome = 8,    // `delayq wait`: the timeout ended before the job was completed, dead or cancelled
};

inline int ExitCodeOf(Code code) {
  switch (code) {
    case Code::kOk: return kExitOk;
    case Code::kInvalidArgument:
    case Code::kTooLarge: return kExitBadInput;
    case Code::kNotFound: return kExitNotFound;
    case Code::kConflict:
    case Code::kLeaseExpired: return kExitConflict;
    case Code::kUnavailable: return kExitUnreachable;
    case Code::kUnauthenticated: return kExitAuth;
    case Code::kResourceExhausted: return kExitOverloaded;
    case Code::kIoError:
    case Code::kCorruption:
    case Code::kInternal: return kExitFailure;
  }
  return kExitFailure;
}

inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 ok, 1 failure, 2 bad input, 3 not found, 4 conflict or stale receipt, "
    "5 server unreachable, 6 authentication needed, 7 server overloaded, 8 no outcome before the timeout "
    "(delayq wait).";

}  // namespace delayq::cli
