// Building answers: JSON bodies and the error answer of every route (wire/error.h's shape, with
// the HTTP status of the code: HttpStatusOf).
#pragma once

#include <string>
#include <string_view>

#include "delayq/status.h"
#include "http/api.h"

namespace delayq::http {

HttpResponse JsonResponse(int status, std::string body);
HttpResponse ErrorResponse(const Status& status);
// An answer of the transport rather than a store: `code` is one of its own (forbidden,
// method_not_allowed, unsupported_media_type, ...).
HttpResponse ErrorResponse(int http_status, std::string_view code, std::string_view message);

}  // namespace delayq::http
