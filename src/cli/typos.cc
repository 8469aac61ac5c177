// "Did you mean": a mistyped subcommand or option found on the command line, for the parse
// error CLI11 raises (which only says that the arguments were not expected).
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "core/nearest.h"

namespace delayq::cli {
namespace {

std::vector<CLI::App*> Subcommands(CLI::App* level) {
  return level->get_subcommands([](CLI::App*) { return true; });
}

// An option of `level` or of a command above it (the global options count everywhere).
const CLI::Option* FindOption(CLI::App* level, const std::string& name) {
  for (CLI::App* a = level; a; a = a->get_parent()) {
    if (const CLI::Option* o = a->get_option_no_throw(name)) return o;
  }
  return nullptr;
}

std::string CommandPath(CLI::App* level) {
  std::string path;
  for (CLI::App* a = level; a && a->get_parent(); a = a->get_parent()) path = " " + a->get_name() + path;
  return "delayq" + path;
}

}  // namespace

std::string TypoHint(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  bool positional_seen = false;  // a command's own arguments have begun: no subcommand follows
  for (int i = 1; i < argc; ++i) {
    const std::string token = argv[i];
    if (token == "--") break;  // `work QUEUE -- CMD...`: the rest is the handler's
    if (token.starts_with("--")) {
      const std::string name = token.substr(0, token.find('='));
      const CLI::Option* o = FindOption(level, name);
      if (!o) {
        std::vector<std::string> names;
        for (CLI::App* a = level; a; a = a->get_parent()) {
          for (const CLI::Option* opt : a->get_options()) {
            for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
          }
        }
        const std::vector<std::string_view> known(names.begin(), names.end());
        return fmt::format("unknown option \"{}\" for `{}`{}; see `{} --help`", name, CommandPath(level),
                           DidYouMean(name, known), CommandPath(level));
      }
      if (token.find('=') == std::string::npos && o->get_items_expected_min() > 0) ++i;  // its value
      continue;
    }
    if (token.starts_with("-") && token.size() > 1) continue;  // -h and other short flags
    if (positional_seen) continue;
    const std::vector<CLI::App*> subs = Subcommands(level);
    if (subs.empty()) {
      positional_seen = true;
      continue;
    }
    CLI::App* next = nullptr;
    for (CLI::App* s : subs) {
      if (s->get_name() == token) next = s;
    }
    if (next) {
      level = next;
      continue;
    }
    std::vector<std::string_view> names;
    for (CLI::App* s : subs) names.push_back(s->get_name());
    return fmt::format("unknown command \"{}\" for `{}`{}; see `{} --help` for the list", token.substr(0, 64),
                       CommandPath(level), DidYouMean(token, names), CommandPath(level));
  }
  return "";
}

}  // namespace delayq::cli
