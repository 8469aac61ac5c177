// The part of the prelude (lua/prelude.lua) one script uses.
//
// Redis runs a script's whole text at every call, so each `local function` of the prelude is a
// closure made anew per call, used or not: EVALSHA of the whole prelude and `return 1` took
// 6.8 µs a call against 1.8 µs for `return 1` alone, of the ack's part 3.5 µs (docs/performance.md,
// "The prelude, cut to what each script uses"). A script is sent with the prelude's definitions it names, and
// those theirs name, in the prelude's order, and with the prelude's head (the lines before its
// first definition) and tail (the comment lines after its last). A name counts as used where it
// appears outside comments, string literals and field names (`m.body` names no local `body`).
//
// The prelude's shape, which this relies on (checked here, and refused at start-up like a missing
// file): each definition starts at column 0 with `local`, and the comment lines just above it
// belong to it; what else starts at column 0 inside a definition is its closing `end` or a
// comment. No generic tool does this cut (a Lua minifier would have to run at build time and
// know Redis's globals); it is a few dozen lines over the prelude's own fixed layout.
#pragma once

#include <string>
#include <string_view>

namespace delayq::redis {

// The prelude's lines that `script` needs; aborts with a message when `prelude` has not the shape
// described above (a build defect).
std::string PreludeFor(std::string_view prelude, std::string_view script);

}  // namespace delayq::redis
