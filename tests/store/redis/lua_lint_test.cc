// The Redis store's Lua, linted as Redis receives it: luacheck (Debian's lua-check, which
// `make deps` installs) over each script, the prelude then its own file, with
// src/store/redis/lua/.luacheckrc. A missing luacheck fails the test rather than skipping it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "store/redis/scripts.h"
#include "support/process.h"

namespace delayq::testing {
namespace {

const std::string kLuaDir = std::string(DELAYQ_SOURCE_DIR) + "/src/store/redis/lua";

TEST(RedisLua, EveryScriptPassesLuacheckAsRedisReceivesIt) {
  TempDir dir;
  std::vector<std::string> args = {"luacheck",   "--config",    kLuaDir + "/.luacheckrc",
                                   "--no-color", "--formatter", "plain"};
  for (const redis::Script* s : redis::AllScripts()) {
    const std::string path = dir.Sub(s->name + ".lua");
    std::ofstream(path, std::ios::binary) << s->source;
    args.push_back(path);
  }
  // And the prelude whole: each script gets only its part of it (a name defined twice is found
  // here, as is what no script uses).
  std::ofstream(dir.Sub("prelude.lua"), std::ios::binary) << redis::WholePrelude();
  args.push_back(dir.Sub("prelude.lua"));
  RunResult r;
  try {
    r = RunProcess(args);
  } catch (const std::exception& e) {
    FAIL() << "luacheck did not run (" << e.what() << "): install Debian's lua-check (make deps does)";
  }
  EXPECT_EQ(r.exit_code, 0) << "luacheck found (line numbers count the part of the prelude sent with the script, "
                            << "src/store/redis/lua/prelude.lua, first):\n"
                            << r.out << r.err;
}

// Every file in lua/ is the prelude or one script's (a file no script names would be dead code
// that still looks alive), and every script has its file.
TEST(RedisLua, EachLuaFileIsAScriptOrThePrelude) {
  std::set<std::string> files, scripts;
  for (const auto& e : std::filesystem::directory_iterator(kLuaDir)) {
    if (e.path().extension() == ".lua") files.insert(e.path().stem().string());
  }
  for (const redis::Script* s : redis::AllScripts()) scripts.insert(s->name);
  scripts.insert("prelude");
  EXPECT_EQ(files, scripts);
}

}  // namespace
}  // namespace delayq::testing
