#include "core/redact.h"

#include <regex>

namespace delayq {

std::string RedactSecrets(std::string_view text) {
  std::string out(text);
  if (const auto scheme = out.find("://"); scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("?#", start);
    const size_t at = out.rfind('@', end == std::string::npos ? std::string::npos : end - 1);
    if (at != std::string::npos && at >= start) {
      const size_t colon = out.find(':', start);
      if (colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  static const std::regex param(R"(([A-Za-z_]*password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*))", std::regex::icase);
  return std::regex_replace(out, param, "$1***");
}

}  // namespace delayq
