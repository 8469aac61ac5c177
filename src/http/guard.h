// Decided from a request's header alone, before its body is read and before any route.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/api.h"
#include "http/target.h"

namespace delayq::http {

// A response refusing a request a browser page could have sent on a user's behalf (DNS rebinding,
// a foreign Origin, a body that is not JSON), or nothing when the request may go on.
// `allowed_hosts` are lower case.
std::optional<HttpResponse> RefuseBrowserAttack(const HttpRequest& request,
                                                const std::vector<std::string>& allowed_hosts);

// 401 when `token` is set and the request carries none or another (compared in constant time);
// /healthz and the dashboard's page itself are public.
std::optional<HttpResponse> RefuseUnauthenticated(const HttpRequest& request, const Target& target,
                                                  std::string_view token);

std::string Lower(std::string_view s);

}  // namespace delayq::http
