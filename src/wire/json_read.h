// Reading JSON for the wire format, over simdjson's on-demand parser (which can hand back the
// exact text of a value, so a JSON payload is stored and returned verbatim). For the wire
// library's own files: the message families (enqueue.h, job.h, ...) are its interface.
//
// Two manners. A request body is read strictly: validated whole first (UTF-8, syntax, nesting
// below kMaxJsonDepth), then every error is kInvalidArgument naming the field. An answer from a
// server is read leniently: a missing or odd field keeps its default (servers may be newer).
#pragma once

#include <simdjson.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/json_value.h"
#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq::wire {

namespace sj = simdjson::ondemand;

using delayq::kMaxJsonDepth;  // core/json_value.h

// A padded copy of the text and the on-demand parser over it.
struct Doc {
  simdjson::padded_string text;
  sj::parser parser;
  sj::document doc;
};

// --- request bodies (strict) ---
// Validates the whole body, then opens it for the walk. An empty body is an error.
Result<std::unique_ptr<Doc>> OpenRequest(std::string_view body);
Status TypeError(std::string_view field, std::string_view expected);
// A field the request object does not have (objects are closed): kInvalidArgument naming it
// (with its prefix, e.g. "jobs[3].") and the nearest known field, or every known field when
// none is near.
Status UnknownField(std::string_view prefix, std::string_view key, std::span<const std::string_view> known);
Status GetInt(sj::value v, std::string_view field, int64_t* out, std::string_view expected);
Status GetString(sj::value v, std::string_view field, std::string* out);
Status GetBool(sj::value v, std::string_view field, bool* out);
// The exact text of a JSON value.
Status RawValue(sj::value v, std::string_view field, std::string* out);
using delayq::IsJsonValue;  // core/json_value.h

// --- answers (lenient) ---
// A field that could not be read leniently: it keeps its default.
inline void Discard(simdjson::error_code) {}
Status Malformed(std::string_view what);  // kInternal: "the server's answer is not a valid ..."
Result<std::unique_ptr<Doc>> OpenResponse(std::string_view body, std::string_view what);
std::string Str(sj::value v);
int64_t Int(sj::value v);
double Dbl(sj::value v);
std::string Raw(sj::value v);
bool IsNull(sj::value v);
Headers ReadHeaders(sj::value v);
JobState StateOf(std::string_view s);
// A delivery object of a reserve answer or a stream line (reserve.cc); `what` names the answer.
Status ReadDelivery(sj::object o, Delivery& d, std::string_view what);

// Finds `field` in the answer's top-level object and hands its value to `fn`.
template <class Fn>
Status WithField(std::string_view body, std::string_view what, std::string_view field, Fn fn) {
  auto d = OpenResponse(body, what);
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed(what);
  sj::value v;
  if (o.find_field_unordered(field).get(v)) return Malformed(what);
  return fn(v);
}

}  // namespace delayq::wire
