#pragma once

namespace delayq::cli {

// Parses the command line and runs the command; returns the exit code (see ExitCodeOf).
int Main(int argc, char** argv);

}  // namespace delayq::cli
