#include "cli/cli_common.h"

namespace delayq::cli {
void AddBenchCommand(CLI::App&, Global&, int&) {}
}  // namespace delayq::cli
