// `delayq serve --config FILE` (or DELAYQ_CONFIG): serve's options from a TOML file, read by
// toml++ (Debian's libtomlplusplus-dev).
//
// Keys are serve's long option names without the dashes (`max-queues = 100`; `max_queues` is the
// same); values are TOML strings, integers, floats, booleans (flags) or arrays (allowed-hosts).
// Precedence: a flag on the command line, then its DELAYQ_* variable, then the file, then the
// default. An unknown key, a table, or a value of the wrong kind is an error that names the file,
// the line and the key (and the nearest known key).
//
// How: before the command line is parsed, each key of the file sets its option's DELAYQ_*
// variable when that is not set already, so CLI11 takes it as it takes the environment (which a
// flag overrides). (CLI11's own config files apply to the main command only, and before the
// environment, which would make the file win over the variables.)
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/status.h"

namespace delayq::cli {

// Adds --config to `serve` (with DELAYQ_CONFIG); LoadServeConfigFile reads it.
void AddConfigFileOption(CLI::App* serve);

// What a config file set: each key, and where ("delayq.toml:3:1").
struct LoadedConfig {
  std::vector<std::pair<std::string, std::string>> set;
};

// When argv runs `serve` with a config file (--config FILE, --config=FILE or DELAYQ_CONFIG),
// reads it into serve's variables as above. kInvalidArgument naming file, line and key.
Status LoadServeConfigFile(const CLI::App& serve, int argc, char** argv, LoadedConfig* loaded);
// For an error of the command line's parse: " (set by FILE:LINE:COL: key)" when it is about an
// option the file set, else "".
std::string ConfigFileNote(const LoadedConfig& loaded, std::string_view error);

}  // namespace delayq::cli
