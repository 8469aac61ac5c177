// The Lua files of src/store/redis/lua/, embedded at build time by lua/embed.cmake (generated
// lua_sources.cc): the scripts are edited, linted (luacheck) and read as Lua.
#pragma once

namespace delayq::redis {

struct LuaSource {
  const char* name;  // the file's name without ".lua"
  const char* text;
};
extern const LuaSource kLuaSources[];
extern const int kLuaSourceCount;

}  // namespace delayq::redis
