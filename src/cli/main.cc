// The `delayq` command.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "cli/commands.h"

int main(int argc, char** argv) {
  return delayq::cli::Main(argc, argv);
}
