-- luacheck's settings for the Redis store's scripts. The test (tests/store/redis/lua_lint_test.cc)
-- lints each script as Redis receives it: lua/prelude.lua, then the script's own file.
std = "lua51"
max_line_length = 120
-- What Redis gives a script (EVAL's KEYS and ARGV, the redis API, its bundled libraries).
read_globals = { "redis", "KEYS", "ARGV", "cjson", "cmsgpack", "struct", "bit" }
