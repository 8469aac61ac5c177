// JSON read with this thread's simdjson DOM parser: whether bytes are one JSON value (the check
// for the values a store keeps as JSON text and an answer shows verbatim: a touch's progress, a
// payload shown as "payload" rather than base64), and the parse a request body is validated by.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <string_view>

namespace delayq {

// Deeper nesting is refused, in request bodies and in the values they carry.
inline constexpr size_t kMaxJsonDepth = 64;

// One parse of `bytes` (nested at most max_depth) by this thread's DOM parser; root() is valid
// while this object lives. The parser keeps buffers of several times the largest document it has
// parsed, for the life of its thread (three 60 MiB bodies left 2.3 GiB resident): past 1 MiB they
// are given back when this object goes, and glibc is asked to return the pages. One at a time
// per thread: a second parse on the thread would overwrite the first's root.
class ThreadDomParse {
 public:
  ThreadDomParse(std::string_view bytes, size_t max_depth);
  ~ThreadDomParse();
  ThreadDomParse(const ThreadDomParse&) = delete;
  ThreadDomParse& operator=(const ThreadDomParse&) = delete;

  // SUCCESS, or why not: MEMALLOC when the buffers could not be had, DEPTH_ERROR, UTF8_ERROR, ...
  simdjson::error_code error() const { return error_; }
  simdjson::dom::element root() const { return root_; }

 private:
  simdjson::error_code error_ = simdjson::SUCCESS;
  simdjson::dom::element root_;
};

// True when `bytes` is exactly one valid JSON value (UTF-8, surrounding whitespace allowed),
// nested at most max_depth levels.
bool IsJsonValue(std::string_view bytes, size_t max_depth = kMaxJsonDepth);

}  // namespace delayq
