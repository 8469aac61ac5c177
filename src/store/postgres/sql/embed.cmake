# Writes the SQL files of DIR as C++ string constants (sql_sources.h), in name order.
# Run by CMake at build time: cmake -DDIR=<src/store/postgres/sql> -DOUT=<file> -P embed.cmake
file(GLOB FILES "${DIR}/*.sql")
list(SORT FILES)
set(body "")
set(count 0)
foreach(file IN LISTS FILES)
  get_filename_component(name "${file}" NAME_WE)
  file(READ "${file}" text)
  string(FIND "${text}" ")DQ_SQL\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw-string delimiter )DQ_SQL\"")
  endif()
  string(APPEND body "    {\"${name}\", R\"DQ_SQL(${text})DQ_SQL\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
file(WRITE "${OUT}.tmp" "// Generated from src/store/postgres/sql by embed.cmake; do not edit.\n"
  "#include \"store/postgres/sql_sources.h\"\n\nnamespace delayq::postgres {\n"
  "const SqlSource kSqlSources[] = {\n${body}};\nconst int kSqlSourceCount = ${count};\n}  // namespace delayq::postgres\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
