// delayq's version (CMake's project version) and the commit it was built from (a short git
// hash, "-dirty" with uncommitted changes, "unknown" outside a clone), for `delayq --version`,
// GET /v1/version and the delayq_build_info metric. Defined in a file generated at build time.
#pragma once

#include <string_view>

namespace delayq {

std::string_view Version();  // "0.2.0"
std::string_view Commit();   // "e61ed76a1b2c"

}  // namespace delayq
