#include "http/target.h"

#include "core/percent.h"

namespace delayq::http {

Target Target::Parse(std::string_view target) {
  Target t;
  std::string_view path = target, query;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) t.segments.push_back(PercentDecoded(path.substr(start, slash - start)));
    start = slash + 1;
  }
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    size_t eq = part.find('=');
    if (!part.empty()) {
      t.query.emplace_back(PercentDecoded(part.substr(0, eq), true),
                           eq == std::string_view::npos ? "" : PercentDecoded(part.substr(eq + 1), true));
    }
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return t;
}

const std::string* Target::Query(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace delayq::http
