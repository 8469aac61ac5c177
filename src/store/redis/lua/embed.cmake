# Writes the Lua files of DIR as C++ string constants (lua_sources.h).
# Run by CMake at build time: cmake -DDIR=<src/store/redis/lua> -DOUT=<file> -P embed.cmake
file(GLOB FILES "${DIR}/*.lua")
list(SORT FILES)
set(body "")
set(count 0)
foreach(file IN LISTS FILES)
  get_filename_component(name "${file}" NAME_WE)
  file(READ "${file}" text)
  string(FIND "${text}" ")DQ_LUA\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw-string delimiter )DQ_LUA\"")
  endif()
  string(APPEND body "    {\"${name}\", R\"DQ_LUA(${text})DQ_LUA\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
file(WRITE "${OUT}.tmp" "// Generated from src/store/redis/lua by embed.cmake; do not edit.\n"
  "#include \"store/redis/lua_sources.h\"\n\nnamespace delayq::redis {\n"
  "const LuaSource kLuaSources[] = {\n${body}};\nconst int kLuaSourceCount = ${count};\n}  // namespace delayq::redis\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
