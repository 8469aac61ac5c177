// "Did you mean …?": the known name nearest to a mistyped one, for the wire format's unknown
// fields, the CLI's unknown subcommands and flags, and the config file's unknown keys.
//
// Written here rather than taken from a library: it is the optimal-string-alignment edit
// distance (Levenshtein plus swapping two neighbours, the commonest typo: "dealy_ms"), twenty
// lines, and no Debian library offers it for C++ short of pulling in a search engine.
#pragma once

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace delayq {

// Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`.
int EditDistance(std::string_view a, std::string_view b);

// The name in `known` nearest to `typed`, when it is near enough to be the one meant: at most
// one edit for names up to 4 characters, two up to 8, three beyond. Ties go to the earlier name.
// Failing that, a name that starts with what was typed, or with which it starts (at least three
// characters shared): a unit left off or added, "wait" for "wait_ms", "lease_msec" for "lease_ms".
std::optional<std::string_view> Nearest(std::string_view typed, std::span<const std::string_view> known);
inline std::optional<std::string_view> Nearest(std::string_view typed, std::initializer_list<std::string_view> known) {
  return Nearest(typed, std::span<const std::string_view>(known.begin(), known.size()));
}

// ` (did you mean "NAME"?)` for the nearest name, or "" when none is near.
std::string DidYouMean(std::string_view typed, std::span<const std::string_view> known);

}  // namespace delayq
