// What is decided from a request's header alone, before its body is read and before any route:
// the browser guard (docs/security.md) and the bearer token.
#include "http/guard.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "http/response.h"

namespace delayq::http {
namespace {

// "Authorization: Bearer TOKEN", the scheme in any case (RFC 7235), compared in time that does
// not depend on where the token differs (a timing side channel would reveal it byte by byte).
bool BearerMatches(std::string_view header, std::string_view token) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  }
  std::string_view given = header.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    diff |= static_cast<unsigned char>(token[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

// The host name of a Host header or an origin's authority: "[::1]:7070" -> "::1",
// "Example.com:80" -> "example.com".
std::string HostName(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    return Lower(authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  return Lower(authority.substr(0, authority.rfind(':')));
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

// A web page in a browser on a machine that can reach delayq must not drive it (docs/security.md):
//  - DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
//    "Host: evil.example"; only IP addresses, localhost and --allowed-hosts are answered;
//  - cross-site requests: a browser sends Origin; it must be this server itself;
//  - a cross-site form or fetch without a preflight can only send text/plain, form or
//    multipart bodies: requests with a body (POST, PUT, PATCH) must say application/json.
// Clients that are not browsers send no Origin and pass the first two rules unchanged.
std::optional<HttpResponse> RefuseBrowserAttack(const HttpRequest& request,
                                                const std::vector<std::string>& allowed_hosts) {
  const bool any_host = std::find(allowed_hosts.begin(), allowed_hosts.end(), "*") != allowed_hosts.end();
  if (!request.host.empty() && !any_host) {
    const std::string name = HostName(request.host);
    if (name != "localhost" && !IsIpLiteral(name) &&
        std::find(allowed_hosts.begin(), allowed_hosts.end(), name) == allowed_hosts.end()) {
      return ErrorResponse(403, "forbidden",
                           fmt::format("Host \"{}\" is not a name this server answers to; name it with "
                                       "delayq serve --allowed-hosts {} (a guard against DNS rebinding)",
                                       request.host.substr(0, 200), name.substr(0, 200)));
    }
  }
  if (!request.origin.empty()) {
    const size_t scheme = request.origin.find("://");
    const std::string authority =
        scheme == std::string::npos ? "" : Lower(std::string_view(request.origin).substr(scheme + 3));
    if (authority.empty() || authority != Lower(request.host)) {
      return ErrorResponse(403, "forbidden",
                           fmt::format("a request from the web page at {} is refused: only delayq's own "
                                       "dashboard may call the API from a browser",
                                       request.origin.substr(0, 200)));
    }
  }
  if (request.method == "POST" || request.method == "PUT" || request.method == "PATCH") {
    const std::string type = Lower(request.content_type.substr(0, request.content_type.find(';')));
    std::string trimmed = type;
    while (!trimmed.empty() && trimmed.back() == ' ') trimmed.pop_back();
    if (trimmed != "application/json") {
      return ErrorResponse(
          415, "unsupported_media_type",
          fmt::format("{} needs \"Content-Type: application/json\" (got {}); with curl, "
                      "use --json '{{...}}' or -H 'Content-Type: application/json'",
                      request.method,
                      request.content_type.empty() ? "none" : "\"" + request.content_type.substr(0, 100) + "\""));
    }
  }
  return std::nullopt;
}

std::optional<HttpResponse> RefuseUnauthenticated(const HttpRequest& request, const Target& target,
                                                  std::string_view token) {
  // Public: /healthz, and the dashboard's page itself (it holds no data; it asks for the token
  // before it calls the API).
  const bool public_route = (target.segments.size() == 1 && target.segments[0] == "healthz") ||
                            (target.segments.empty() && (request.method == "GET" || request.method == "HEAD"));
  if (token.empty() || public_route || BearerMatches(request.authorization, token)) {
    return std::nullopt;
  }
  HttpResponse r =
      ErrorResponse(401, "unauthenticated",
                    request.authorization.empty() ? "this server needs a bearer token: send \"Authorization: "
                                                    "Bearer <token>\" (the token given to delayq serve)"
                                                  : "the bearer token is wrong");
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace delayq::http
