#include "store/redis/scripts.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/histogram.h"
#include "store/redis/lua_sources.h"
#include "store/redis/prelude_subset.h"
#include "store/redis/redis_meta.h"

namespace delayq::redis {
namespace {

// A file of src/store/redis/lua/, embedded at build time (lua/embed.cmake). A name with no file
// is a build defect, found at start-up: every script is made when the library loads.
std::string_view LuaFile(std::string_view name) {
  for (int i = 0; i < kLuaSourceCount; ++i) {
    if (kLuaSources[i].name == name) return kLuaSources[i].text;
  }
  std::fprintf(stderr, "delayq: no Lua file %.*s.lua was embedded (src/store/redis/lua)\n",
               static_cast<int>(name.size()), name.data());
  std::abort();
}

std::string Replace(std::string text, std::string_view name, std::string_view value) {
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + value.size())) {
    text.replace(at, name.size(), value);
  }
  return text;
}

}  // namespace

// lua/prelude.lua with its @NAME@ placeholders filled from the C++ constants they mirror, so the
// two cannot drift: @META_FORMAT@ and @RECORD_IN_META_MAX@ (redis_meta.h), @LATENESS_EDGES@
// (LatenessSummary::kLatenessBucketsMs).
const std::string& WholePrelude() {
  static const std::string prelude = [] {
    std::string edges;
    for (double edge : LatenessSummary::kLatenessBucketsMs)
      edges += fmt::format("{}{}", edges.empty() ? "" : ", ", edge);
    std::string text = Replace(std::string(LuaFile("prelude")), "@META_FORMAT@", std::to_string(kMetaFormat));
    text = Replace(std::move(text), "@RECORD_IN_META_MAX@", std::to_string(kRecordInMetaMaxBytes));
    return Replace(std::move(text), "@LATENESS_EDGES@", edges);
  }();
  return prelude;
}

namespace {

// A script as Redis receives it: the part of the prelude it uses (prelude_subset.h), then its own.
std::string WithPrelude(std::string_view body) { return PreludeFor(WholePrelude(), body) + std::string(body); }

}  // namespace

Script Make(const char* name) { return Script{name, WithPrelude(LuaFile(name))}; }

// A script that needs none of the prelude (it works on keys of its own, not a queue's 17).
Script Standalone(const char* name) { return Script{name, std::string(LuaFile(name))}; }

Script ProbeScript(std::string name, std::string_view body) { return Script{std::move(name), WithPrelude(body)}; }

// Each script's arguments and answer are described at the top of its file.
const Script kEnqueueScript = Make("enqueue");
const Script kPromoteScript = Make("promote");
const Script kCancelScript = Make("cancel");
const Script kWatchScript = Make("watch");
const Script kRescheduleScript = Make("reschedule");
const Script kDeleteQueueScript = Make("delete_queue");
const Script kGetScript = Make("get");
const Script kStatsScript = Make("stats");
const Script kScheduleScript = Make("schedule");
const Script kReserveScript = Make("reserve");
const Script kReapScript = Make("reap");
const Script kAckScript = Make("ack");
const Script kNackScript = Make("nack");
const Script kReleaseScript = Make("release");
const Script kTouchScript = Make("touch");
const Script kReplayScript = Make("replay");
const Script kPurgeScript = Make("purge");
const Script kDeadExpireScript = Make("dead_expire");
const Script kBrowseScript = Make("browse");
const Script kStoreScheduleScript = Standalone("schedule_store");
const Script kEraseScheduleScript = Standalone("schedule_erase");
const Script kCreateQueueScript = Standalone("create_queue");

const std::vector<const Script*>& AllScripts() {
  static const std::vector<const Script*> all = {
      &kEnqueueScript,     &kPromoteScript,    &kCancelScript,   &kRescheduleScript,    &kDeleteQueueScript,
      &kGetScript,         &kStatsScript,      &kScheduleScript, &kReserveScript,       &kReapScript,
      &kAckScript,         &kNackScript,       &kReleaseScript,  &kTouchScript,         &kReplayScript,
      &kPurgeScript,       &kDeadExpireScript, &kBrowseScript,   &kStoreScheduleScript, &kEraseScheduleScript,
      &kCreateQueueScript, &kWatchScript};
  return all;
}

}  // namespace delayq::redis
