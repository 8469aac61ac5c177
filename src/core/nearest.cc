#include "core/nearest.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace delayq {

int EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  // Three rows of the dynamic-programming table: the swap looks two rows back.
  std::vector<int> back(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], back[j - 2] + 1);
    }
    std::swap(back, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::optional<std::string_view> Nearest(std::string_view typed, std::span<const std::string_view> known) {
  const int allowed = typed.size() <= 4 ? 1 : typed.size() <= 8 ? 2 : 3;
  std::optional<std::string_view> best;
  int best_distance = allowed + 1;
  for (std::string_view name : known) {
    const int d = EditDistance(typed, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  if (best || typed.size() < 3) return best;
  for (std::string_view name : known) {
    if (name.starts_with(typed) || (name.size() >= 3 && typed.starts_with(name))) return name;
  }
  return std::nullopt;
}

std::string DidYouMean(std::string_view typed, std::span<const std::string_view> known) {
  auto near = Nearest(typed, known);
  return near ? fmt::format(" (did you mean \"{}\"?)", *near) : std::string();
}

}  // namespace delayq
