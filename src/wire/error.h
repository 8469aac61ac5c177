// The error answer of every route: {"error": {"code": "lease_expired", "message": "..."}}, with
// the code's stable name (status.h's CodeName) and the HTTP status that goes with it.
#pragma once

#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq::wire {

std::string ErrorBody(Code code, std::string_view message);
// A non-2xx answer as a Status: its code and message, or the bare HTTP status when the body is
// not an error object (a proxy's page, say).
Status ParseErrorResponse(int http_status, std::string_view body);

}  // namespace delayq::wire
