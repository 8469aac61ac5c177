// The SQL files of src/store/postgres/sql/, embedded at build time by sql/embed.cmake (generated
// sql_sources.cc), in name order. "v<N>_<step>_<what>" belongs to schema version N (migrate.h).
#pragma once

namespace delayq::postgres {

struct SqlSource {
  const char* name;  // the file's name without ".sql"
  const char* text;
};
extern const SqlSource kSqlSources[];
extern const int kSqlSourceCount;

}  // namespace delayq::postgres
