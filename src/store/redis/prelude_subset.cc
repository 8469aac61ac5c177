#include "store/redis/prelude_subset.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

namespace delayq::redis {
namespace {

[[noreturn]] void Misshapen(size_t line, const char* why) {
  std::fprintf(stderr, "delayq: src/store/redis/lua/prelude.lua line %zu: %s (prelude_subset.h says the shape)\n",
               line + 1, why);
  std::abort();
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return lines;
}

bool IsComment(std::string_view line) { return line.starts_with("--"); }
bool IsBlank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Where the long bracket opening at `at` ("[[", "[=[", …) closes, past its end; npos when `at`
// opens none.
size_t LongBracketEnd(std::string_view code, size_t at) {
  size_t level = 0;
  while (at + 1 + level < code.size() && code[at + 1 + level] == '=') ++level;
  if (code.size() <= at + 1 + level || code[at + 1 + level] != '[') return std::string_view::npos;
  const std::string close = "]" + std::string(level, '=') + "]";
  const size_t end = code.find(close, at);
  return end == std::string_view::npos ? code.size() : end + close.size();
}

// The names `code` uses: identifiers outside comments, string literals and field names.
std::set<std::string, std::less<>> Uses(std::string_view code) {
  std::set<std::string, std::less<>> names;
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (code.substr(i, 2) == "--") {
      const size_t long_end =
          i + 2 < code.size() && code[i + 2] == '[' ? LongBracketEnd(code, i + 2) : std::string_view::npos;
      i = long_end != std::string_view::npos ? long_end : code.find('\n', i);
    } else if (c == '\'' || c == '"') {
      for (++i; i < code.size() && code[i] != c && code[i] != '\n'; ++i) {
        if (code[i] == '\\') ++i;
      }
      ++i;
    } else if (c == '[' && LongBracketEnd(code, i) != std::string_view::npos) {
      i = LongBracketEnd(code, i);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < code.size() && (IsNameChar(code[i]) || code[i] == '.')) ++i;  // 1.5e3, 0x1F
    } else if (IsNameChar(c)) {
      const size_t start = i;
      while (i < code.size() && IsNameChar(code[i])) ++i;
      const bool field =
          start > 0 && (code[start - 1] == ':' || (code[start - 1] == '.' && (start < 2 || code[start - 2] != '.')));
      if (!field) names.emplace(code.substr(start, i - start));
    } else {
      ++i;
    }
  }
  return names;
}

struct Definition {
  size_t first = 0, last = 0;  // lines, its comments included
  std::vector<std::string> names;
  std::set<std::string, std::less<>> uses;
};

// A line without its comment.
std::string_view Code(std::string_view line) { return line.substr(0, line.find("--")); }

// `local function f(...)` defines f; `local a, b = ...` defines a and b.
std::vector<std::string> Defined(std::string_view line) {
  line = Code(line);
  line.remove_prefix(6);  // "local "
  if (line.starts_with("function ")) {
    line.remove_prefix(9);
    return {std::string(line.substr(0, line.find('(')))};
  }
  std::vector<std::string> names;
  line = line.substr(0, line.find('='));
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && !IsNameChar(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && IsNameChar(line[i])) ++i;
    if (i > start) names.emplace_back(line.substr(start, i - start));
  }
  return names;
}

struct Prelude {
  std::vector<std::string_view> lines;
  size_t head = 0, tail = 0;  // lines [0, head) and [tail, end) go with every script
  std::vector<Definition> definitions;
  std::map<std::string, size_t, std::less<>> where;  // name -> its definition
};

// Where definition k's code ends (a function's `end` at column 0, else its one line); after it
// only comments may follow. A line of code after it would go wherever the definition goes (a
// review found an indented statement run only for the scripts that use the definition above it),
// and a value that calls something would run only where it is used.
size_t CodeEnd(const Prelude& p, size_t start, size_t last) {
  const std::string_view first = p.lines[start];
  size_t end = start;
  if (first.starts_with("local function ")) {
    for (size_t i = start + 1; i < last; ++i) {
      if (p.lines[i] == "end") {
        end = i;
        break;
      }
    }
  } else if (Code(first).find('(') != std::string_view::npos) {
    Misshapen(start, "a definition that is not a function calls something (it would run only where it is used)");
  }
  for (size_t i = end + 1; i < last; ++i) {
    const std::string_view line = p.lines[i];
    const size_t text = line.find_first_not_of(" \t");
    if (text != std::string_view::npos && !line.substr(text).starts_with("--")) {
      Misshapen(i, "code after a definition's end (it would go only with that definition)");
    }
  }
  return end;
}

Prelude Split(std::string_view text) {
  Prelude p{Lines(text)};
  const auto& lines = p.lines;
  std::vector<size_t> starts;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].starts_with("local ")) starts.push_back(i);
  }
  if (starts.empty()) Misshapen(0, "no definition");
  p.head = starts.front();
  p.tail = lines.size();
  while (p.tail > starts.back() + 1 && (IsComment(lines[p.tail - 1]) || IsBlank(lines[p.tail - 1]))) --p.tail;
  for (size_t k = 0; k < starts.size(); ++k) {
    Definition d;
    d.first = starts[k];
    if (k > 0) {
      while (d.first > starts[k - 1] + 1 && IsComment(lines[d.first - 1])) --d.first;
    }
    p.definitions.push_back(std::move(d));
  }
  for (size_t k = 0; k < starts.size(); ++k) {
    Definition& d = p.definitions[k];
    d.last = k + 1 < starts.size() ? p.definitions[k + 1].first : p.tail;
    d.names = Defined(lines[starts[k]]);
    if (d.names.empty()) Misshapen(starts[k], "a `local` that defines no name");
    for (const auto& name : d.names) {
      // Lua would take the later one; the cut keeps one definition per name.
      if (!p.where.emplace(name, k).second) Misshapen(starts[k], "a name defined twice");
    }
    std::string code;
    const size_t code_end = CodeEnd(p, starts[k], d.last);
    for (size_t i = starts[k]; i <= code_end; ++i) {
      const std::string_view line = lines[i];
      if (i > starts[k] && !line.empty() && !std::isspace(static_cast<unsigned char>(line[0])) && line != "end" &&
          !IsComment(line)) {
        Misshapen(i, "a line at column 0 that is neither a definition, its `end`, nor a comment");
      }
      code.append(line).push_back('\n');
    }
    d.uses = Uses(code);
  }
  return p;
}

}  // namespace

std::string PreludeFor(std::string_view prelude, std::string_view script) {
  const Prelude p = Split(prelude);
  const auto& where = p.where;
  std::vector<bool> needed(p.definitions.size(), false);
  std::vector<size_t> todo;
  auto need = [&](const std::set<std::string, std::less<>>& uses) {
    for (const auto& name : uses) {
      auto it = where.find(name);
      if (it != where.end() && !needed[it->second]) {
        needed[it->second] = true;
        todo.push_back(it->second);
      }
    }
  };
  need(Uses(script));
  while (!todo.empty()) {
    const size_t k = todo.back();
    todo.pop_back();
    need(p.definitions[k].uses);
  }
  std::string out;
  auto emit = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) out.append(p.lines[i]).push_back('\n');
  };
  emit(0, p.head);
  for (size_t k = 0; k < p.definitions.size(); ++k) {
    if (needed[k]) emit(p.definitions[k].first, p.definitions[k].last);
  }
  emit(p.tail, p.lines.size());
  return out;
}

}  // namespace delayq::redis
