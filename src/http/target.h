// A request target split for routing: the path's segments, percent-decoded, and the query's
// parameters in order ('+' is a space only in the query).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace delayq::http {

struct Target {
  std::vector<std::string> segments;  // "/v1/queues/a%20b" -> {"v1", "queues", "a b"}
  std::vector<std::pair<std::string, std::string>> query;

  static Target Parse(std::string_view target);
  // The first parameter of that name, or nullptr.
  const std::string* Query(std::string_view name) const;
};

}  // namespace delayq::http
