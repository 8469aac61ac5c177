// The prelude cut to what a script uses (src/store/redis/prelude_subset.h). That no script misses
// a definition it needs is RedisLua.EveryScriptPassesLuacheckAsRedisReceivesIt's (an undefined
// name is a finding) and the conformance suite's on the Redis fixtures.
#include "store/redis/prelude_subset.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace delayq::testing {
namespace {

const std::string kPrelude =
    "-- head\n"
    "-- luacheck: push ignore 211\n"
    "local A, B = KEYS[1], KEYS[2]\n"
    "\n"
    "-- f's comment\n"
    "local function f() return A end\n"
    "local function g() return 'f' .. \"f\" end  -- f\n"
    "local function h(m) return m.g, m:f() end\n"
    "-- k's comment\n"
    "-- on two lines\n"
    "local function k(x)\n"
    "  --[[ g ]] local s = [[ f ]] .. [==[ g ]==]\n"
    "  return h(x) .. s .. 1.5e3\n"
    "end\n"
    "local LAST = B .. 'x'\n"
    "-- luacheck: pop\n";

TEST(PreludeSubset, AScriptGetsWhatItNamesAndWhatThatNamesInThePreludesOrder) {
  EXPECT_EQ(redis::PreludeFor(kPrelude, "return k(1)\n"),
            "-- head\n"
            "-- luacheck: push ignore 211\n"
            "local function h(m) return m.g, m:f() end\n"
            "-- k's comment\n"
            "-- on two lines\n"
            "local function k(x)\n"
            "  --[[ g ]] local s = [[ f ]] .. [==[ g ]==]\n"
            "  return h(x) .. s .. 1.5e3\n"
            "end\n"
            "-- luacheck: pop\n");
  EXPECT_EQ(redis::PreludeFor(kPrelude, "return LAST .. f()"),
            "-- head\n"
            "-- luacheck: push ignore 211\n"
            "local A, B = KEYS[1], KEYS[2]\n"
            "\n"
            "-- f's comment\n"
            "local function f() return A end\n"
            "local LAST = B .. 'x'\n"
            "-- luacheck: pop\n");
}

// Names in comments, strings, long brackets and fields are no uses; a concatenation's is.
TEST(PreludeSubset, ANameInACommentAStringOrAFieldIsNoUse) {
  const std::string bare = "-- head\n-- luacheck: push ignore 211\n-- luacheck: pop\n";
  for (const char* script : {"-- k\n", "return 'k'", "return \"k\\\"k\"", "return [[k]]", "return [=[\nk\n]=]",
                             "--[[ k ]] return x.k", "return x:k()", "return 1e3", ""}) {
    EXPECT_EQ(redis::PreludeFor(kPrelude, script), bare) << script;
  }
  EXPECT_NE(redis::PreludeFor(kPrelude, "return 'a'..LAST").find("local LAST"), std::string::npos);
}

// The whole prelude names every definition: cut for itself, it is all there, line for line.
TEST(PreludeSubset, ThePreludeCutForItselfIsWhole) {
  EXPECT_EQ(redis::PreludeFor(kPrelude, kPrelude), kPrelude);
  std::ifstream file(std::string(DELAYQ_SOURCE_DIR) + "/src/store/redis/lua/prelude.lua", std::ios::binary);
  std::stringstream real;
  real << file.rdbuf();
  ASSERT_GT(real.str().size(), 1000u);
  EXPECT_EQ(redis::PreludeFor(real.str(), real.str()), real.str());
  EXPECT_LT(redis::PreludeFor(real.str(), "return now_us()").size(), 2000u);
}

// What the cut could get wrong without a word from luacheck is refused when the library loads (a
// review's list): a name defined twice (Lua takes the later, the cut one), code after a
// definition's end (it would go only with that definition), a value that calls something (it
// would run only where it is used).
TEST(PreludeSubsetDeathTest, APreludeOfAnotherShapeIsRefusedAtStart) {
  EXPECT_DEATH(redis::PreludeFor("local function f()\nreturn 1\nend\n", "f()"), "line 2: a line at column 0");
  EXPECT_DEATH(redis::PreludeFor("-- nothing\n", ""), "no definition");
  EXPECT_DEATH(redis::PreludeFor("local function f() return 1 end\nlocal W, f = 8, nil\n", "f()"),
               "line 2: a name defined twice");
  EXPECT_DEATH(redis::PreludeFor("local f = nil\nlocal function h() return 42 end\n  f = h\n", "f()"),
               "line 3: code after a definition's end");
  EXPECT_DEATH(redis::PreludeFor("local function g()\n  return 1\nend\n  redis.setresp(3)\n", "g()"),
               "line 4: code after a definition's end");
  EXPECT_DEATH(redis::PreludeFor("local RESP = redis.setresp(3)\n", ""),
               "line 1: a definition that is not a function calls");
}

// A comment on a definition's line names nothing, and may hold parentheses.
TEST(PreludeSubset, ACommentOnADefinitionsLineIsNoName) {
  const std::string prelude = "local X = nil  -- set by f (once)\nlocal function f() X = 1 end  -- Y\nlocal Y = 2\n";
  EXPECT_EQ(redis::PreludeFor(prelude, "return f()"),
            "local X = nil  -- set by f (once)\nlocal function f() X = 1 end  -- Y\n");
}

}  // namespace
}  // namespace delayq::testing
