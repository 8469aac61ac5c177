# Builds the single dashboard page (index.html with style.css and app.js inlined) and writes it
# as a C++ string constant. Run by CMake at build time: cmake -DSRC=<dir> -DOUT=<file> -P embed.cmake
file(READ "${SRC}/index.html" html)
file(READ "${SRC}/style.css" css)
file(READ "${SRC}/app.js" js)
string(REPLACE "/*@STYLE@*/" "${css}" html "${html}")
string(REPLACE "/*@SCRIPT@*/" "${js}" html "${html}")
string(FIND "${html}" ")DQ_ASSET\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "the dashboard contains the raw-string delimiter )DQ_ASSET\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from src/server/dashboard by embed.cmake; do not edit.\n"
  "namespace delayq::server {\nextern const char kDashboardHtml[];\n"
  "const char kDashboardHtml[] = R\"DQ_ASSET(${html})DQ_ASSET\";\n}  // namespace delayq::server\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
