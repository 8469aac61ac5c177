#include "cli/config_file.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/nearest.h"

namespace delayq::cli {
namespace {

std::string Where(const std::string& file, const toml::source_region& at) {
  return fmt::format("{}:{}:{}", file, at.begin.line, at.begin.column);
}

const char* KindOf(const toml::node& node) {
  if (node.is_table()) return "table";
  if (node.is_array()) return "array";
  if (node.is_date()) return "date";
  if (node.is_time()) return "time";
  if (node.is_date_time()) return "date-time";
  return "value";
}

// One TOML value as the text an option takes; false for a kind no option takes.
bool AsText(const toml::node& node, std::string* out) {
  if (auto s = node.as_string()) {
    *out = s->get();
  } else if (auto i = node.as_integer()) {
    *out = std::to_string(i->get());
  } else if (auto f = node.as_floating_point()) {
    *out = fmt::format("{}", f->get());
  } else if (auto b = node.as_boolean()) {
    *out = b->get() ? "true" : "false";
  } else {
    return false;
  }
  return true;
}

// The config file argv names for `serve`, or DELAYQ_CONFIG's; empty when none.
std::string ConfigFileOf(int argc, char** argv) {
  int i = 1;
  while (i < argc && std::string_view(argv[i]) != "serve" && std::string_view(argv[i]) != "--") ++i;
  if (i >= argc || std::string_view(argv[i]) != "serve") return "";
  for (++i; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--config" && i + 1 < argc) return argv[i + 1];
    if (arg.starts_with("--config=")) return std::string(arg.substr(9));
  }
  const char* env = std::getenv("DELAYQ_CONFIG");
  return env ? env : "";
}

}  // namespace

void AddConfigFileOption(CLI::App* serve) {
  // Read before parsing (LoadServeConfigFile); declared so that it is accepted and documented.
  serve
      ->add_option("--config",
                   "Read serve's options from this TOML file (key = value, keys as the options: "
                   "max-queues = 100); a flag or its DELAYQ_* variable wins over the file")
      ->envname("DELAYQ_CONFIG")
      ->type_name("FILE");
}

namespace {

// Whether the value's kind is the option's: true or false for a switch and only for it, a number
// where a number is due, and a string where text is (CLI11 would read "100" as 100, and 1234 as the
// token "1234"), and never a NUL in a string (the environment would cut it).
Status CheckKind(const CLI::Option& option, const toml::node& node, const std::string& key, const std::string& file) {
  // A switch takes true or false, and only a switch does: "yes", 1 or "false" would otherwise
  // be read by rules of CLI11's own (a quoted "false" still turns a switch on).
  const bool is_switch = option.get_expected_max() == 0;  // add_flag: expected(0)
  if (is_switch && !node.is_boolean()) {
    return Status::InvalidArgument(fmt::format("{}: {} is a switch: write {} = true or {} = false (not a {})",
                                               Where(file, node.source()), key, key, key,
                                               node.is_string() ? "string" : KindOf(node)));
  }
  if (!is_switch && node.is_boolean()) {
    return Status::InvalidArgument(
        fmt::format("{}: {} takes a value (delayq serve --help), not true or false", Where(file, node.source()), key));
  }
  const std::string type = option.get_type_name();
  const bool whole = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0;
  const bool number = whole || type.rfind("FLOAT", 0) == 0 || type.rfind("NUMBER", 0) == 0;
  if (!is_switch && !node.is_array()) {
    if (number && !node.is_number()) {
      return Status::InvalidArgument(fmt::format("{}: {} takes a number ({} = 100), not a {}",
                                                 Where(file, node.source()), key, key,
                                                 node.is_string() ? "string" : KindOf(node)));
    }
    if (whole && node.is_floating_point()) {
      return Status::InvalidArgument(fmt::format("{}: {} takes a whole number, not {}", Where(file, node.source()), key,
                                                 node.as_floating_point()->get()));
    }
    if (!number && node.is_number()) {
      return Status::InvalidArgument(
          fmt::format("{}: {} takes text: write it in quotes ({} = \"...\")", Where(file, node.source()), key, key));
    }
  }
  if (auto s = node.as_string(); s && s->get().find('\0') != std::string::npos) {
    return Status::InvalidArgument(fmt::format("{}: {} holds a NUL character", Where(file, node.source()), key));
  }
  return Status::Ok();
}

// The value as the option's environment variable would hold it (an array: its strings joined by
// commas).
Result<std::string> TextOf(const CLI::Option& option, const toml::node& node, const std::string& key,
                           const std::string& file) {
  std::string text;
  if (const toml::array* array = node.as_array()) {
    if (option.get_items_expected_max() <= 1) {
      return Status::InvalidArgument(
          fmt::format("{}: {} takes one value, not an array", Where(file, node.source()), key));
    }
    std::string joined;
    for (const toml::node& element : *array) {
      if (!AsText(element, &text) || text.find(',') != std::string::npos) {
        return Status::InvalidArgument(fmt::format("{}: {} holds a {}; give strings without commas",
                                                   Where(file, element.source()), key, KindOf(element)));
      }
      joined += (joined.empty() ? "" : ",") + text;
    }
    return joined;
  }
  if (!AsText(node, &text)) {
    return Status::InvalidArgument(
        fmt::format("{}: {} is a {}; serve's options are written key = value at the top of the file (no tables)",
                    Where(file, node.source()), key, KindOf(node)));
  }
  return text;
}

Result<toml::table> ParseConfigFile(const std::string& file) {
  try {
    return toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    if (e.source().begin.line == 0) {  // not opened
      return Status::InvalidArgument(fmt::format(
          "config file {} cannot be read: {}; give a readable TOML file to --config", file, e.description()));
    }
    return Status::InvalidArgument(
        fmt::format("{}: {} (a config file is TOML: key = value per line)", Where(file, e.source()), e.description()));
  }
}

// Serve's option of that long name (nullptr: none that a file may set).
const CLI::Option* OptionNamed(const CLI::App& serve, const std::string& key) {
  if (key == "help" || key == "config") return nullptr;
  for (const CLI::Option* o : serve.get_options()) {
    if (!o->get_lnames().empty() && o->get_lnames()[0] == key) return o;
  }
  return nullptr;
}

}  // namespace

Status LoadServeConfigFile(const CLI::App& serve, int argc, char** argv, LoadedConfig* loaded) {
  const std::string file = ConfigFileOf(argc, argv);
  if (file.empty()) return Status::Ok();
  auto table = ParseConfigFile(file);
  if (!table.ok()) return table.status();
  std::vector<std::string> names;
  for (const CLI::Option* option : serve.get_options()) {
    if (option->get_lnames().empty()) continue;
    const std::string& name = option->get_lnames()[0];
    if (name != "help" && name != "config") names.push_back(name);
  }
  const std::vector<std::string_view> known(names.begin(), names.end());
  for (const auto& [k, node] : *table) {
    std::string key(k.str());
    for (char& c : key) c = c == '_' ? '-' : c;
    if (node.is_table()) {
      return Status::InvalidArgument(
          fmt::format("{}: [{}] is a table; serve's options are written key = value at the top of the file (no tables)",
                      Where(file, k.source()), std::string(k.str()).substr(0, 64)));
    }
    const CLI::Option* option = OptionNamed(serve, key);
    if (!option || option->get_envname().empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: unknown key \"{}\"{}; the keys are serve's options (delayq serve --help)",
                      Where(file, k.source()), std::string(k.str()).substr(0, 64), DidYouMean(key, known)));
    }
    DELAYQ_RETURN_IF_ERROR(CheckKind(*option, node, key, file));
    auto text = TextOf(*option, node, key, file);
    if (!text.ok()) return text.status();
    // A variable already set wins over the file (and the command line over both, as ever).
    if (!std::getenv(option->get_envname().c_str())) {
      ::setenv(option->get_envname().c_str(), text->c_str(), /*overwrite=*/1);
      loaded->set.push_back({key, Where(file, k.source())});
    }
  }
  return Status::Ok();
}

std::string ConfigFileNote(const LoadedConfig& loaded, std::string_view error) {
  for (const auto& [key, where] : loaded.set) {
    if (error.find("--" + key) != std::string_view::npos) return fmt::format(" (set by {}: {})", where, key);
  }
  return "";
}

}  // namespace delayq::cli
