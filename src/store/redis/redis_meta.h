// The meta value of a job: one field of dq:{q}:meta per job id, holding its state and delivery
// bookkeeping. The Lua scripts read and write it (lua/prelude.lua: meta_parse, meta_str); the C++ side
// reads it for Get. Format 2:
//
//   "2|state|due|base|attempt|max|delivery|sid|key_indexed|key"     (the key last: it may hold '|')
//
// Format 3, written only for a job with a priority or a group (others stay format 2):
//
//   "3|state|due|base|attempt|max|delivery|sid|key_indexed|priority|group length|" group key
//
//   state        s scheduled (in due), q queued (in the stream, not leased), r reserved, d dead
//   due          the due time, ms (a dead job keeps the one it had)
//   base         deliveries of earlier stream entries (before a nack); attempt = base + the
//                pending list's delivery count
//   attempt/max  deliveries so far / max_attempts
//   delivery     the current delivery token (hex), "0" when none
//   sid          its stream entry id, "-" when none, "L" when waiting in its lane (scripts.h)
//   key_indexed  1 when dq:{q}:keys maps its key to it
//
// Format 4 is a job's one entry: its meta and its record in one value (issue 30: one hash field
// per job, not a meta and a record each, saves Redis's per-entry cost once per job):
//
//   "4|" length "|" meta record          (meta: a format 2 or 3 meta of `length` bytes)
//
// Format 1 (delayq 0.1) had no version field: "state|due|base|...". All are read. An enqueue
// writes a job whose record is at most kRecordInMetaMaxBytes in format 4, a bigger one in format 2
// or 3 with its record in dq:{q}:jobs, as every job made before format 4 has it (the scripts'
// body_of reads either): every transition rewrites the meta, and a big record would be copied
// each time (a 1 MB job's promote or touch took milliseconds of Redis in one value).
//
// Changing the format: teach both parsers (ParseMeta here and meta_parse in the scripts) format
// N+1 while they still read N, write N+1, raise kMetaFormat, and pin the new bytes in
// tests/store/redis (RedisMeta.*). Servers refuse to open a Redis whose dq:format says its data is
// newer than they read, and a script that meets a newer meta stops with an error. (Servers of
// delayq 0.1 know neither guard: stop them before servers of this release share their Redis.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq::redis {

inline constexpr int kMetaFormat = 4;
inline constexpr const char* kFormatKey = "dq:format";  // the data format of this Redis (kMetaFormat)
// The biggest record kept in its job's meta (format 4); the embedded store inlines records up to
// the same size (kInlineRecordMaxBytes). A 100-byte payload makes a ~120-byte record.
inline constexpr size_t kRecordInMetaMaxBytes = 4096;

struct Meta {
  int format = kMetaFormat;  // as read: 1, 2 or 3 (a format 4 value's meta is 2 or 3: has_record)
  char state = 's';
  int64_t due = 0;
  int32_t base = 0, attempt = 0, max = 0;
  std::string delivery = "0", sid = "-";
  bool key_indexed = false;
  std::string key;
  int32_t priority = 0;     // format 3
  std::string group;        // format 3
  bool has_record = false;  // format 4: the record follows the meta
  std::string record;
};

// kCorruption for a value of neither format; kUnavailable for a newer format.
Result<Meta> ParseMeta(std::string_view text);
// Format 2, or 3 for a job with a priority or a group, inside format 4 when it has its record
// (the scripts' meta_str).
std::string FormatMeta(const Meta& meta);

}  // namespace delayq::redis
