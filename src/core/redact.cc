#include "core/redact.h"

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "core/percent.h"

namespace delayq {

namespace {

// Where a URI's user info hides its password: [colon + 1, at), or {npos, npos}. libpq ends the
// user info at the last '@' before the first '/' that follows an '@' (so a password may hold '?',
// '#', '/' and '@' unencoded); a URL with a port and an '@' in its path or query is masked too
// far, never too little.
std::pair<size_t, size_t> UserInfoPassword(std::string_view s) {
  const size_t scheme = s.find("://");
  if (scheme == std::string_view::npos) return {std::string_view::npos, std::string_view::npos};
  const size_t start = scheme + 3;
  const size_t first_at = s.find('@', start);
  if (first_at == std::string_view::npos) return {std::string_view::npos, std::string_view::npos};
  const size_t slash = s.find('/', first_at);
  const size_t at = s.rfind('@', slash == std::string_view::npos ? std::string_view::npos : slash - 1);
  const size_t colon = s.find(':', start);
  if (colon >= at) return {std::string_view::npos, std::string_view::npos};
  return {colon + 1, at};
}

// A parameter whose name ends in "password", and its value: quoted, or up to the end of a URI
// query's parameter, or (key=value strings) up to an unescaped blank.
const std::regex& ParamPattern(bool uri) {
  static const std::regex in_uri(R"(([A-Za-z_]*password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&#\s]*))", std::regex::icase);
  static const std::regex in_conninfo(R"(([A-Za-z_]*password\s*=\s*)('(?:[^'\\]|\\.)*'|(?:\\.|[^\s\\])*))",
                                      std::regex::icase);
  return uri ? in_uri : in_conninfo;
}

// The secret values of a connection string: the user info's password and each *password=
// parameter's value, as written and percent-decoded, and the pieces of each between the
// characters a parser may stop at (libpq names the part of a password it took for a port).
std::vector<std::string> SecretsOf(std::string_view connection) {
  std::vector<std::string> whole;
  const auto [from, to] = UserInfoPassword(connection);
  if (from != std::string_view::npos) whole.emplace_back(connection.substr(from, to - from));
  const std::string text(connection);
  const bool uri = connection.find("://") != std::string_view::npos;
  for (std::sregex_iterator it(text.begin(), text.end(), ParamPattern(uri)), end; it != end; ++it) {
    std::string v = (*it)[2].str();
    if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
    whole.push_back(v);
  }
  std::vector<std::string> out;
  for (const std::string& w : whole) {
    for (const std::string& v : {w, PercentDecoded(w)}) {
      out.push_back(v);
      size_t begin = 0;
      while (begin <= v.size()) {
        const size_t stop = v.find_first_of("/?#@:&%\\ ", begin);
        out.push_back(v.substr(begin, stop == std::string::npos ? std::string::npos : stop - begin));
        if (stop == std::string::npos) break;
        begin = stop + 1;
      }
    }
  }
  std::erase_if(out, [](const std::string& s) { return s.size() < 2; });
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

}  // namespace

std::string RedactSecrets(std::string_view text) {
  std::string out(text);
  if (const auto [from, to] = UserInfoPassword(out); from != std::string::npos) out.replace(from, to - from, "***");
  return std::regex_replace(out, ParamPattern(text.find("://") != std::string_view::npos), "$1***");
}

std::string RedactSecretsIn(std::string_view message, std::string_view connection) {
  std::string out(message);
  for (const std::string& secret : SecretsOf(connection)) {
    for (size_t at = out.find(secret); at != std::string::npos; at = out.find(secret, at + 3)) {
      out.replace(at, secret.size(), "***");
    }
  }
  return RedactSecrets(out);
}

}  // namespace delayq
