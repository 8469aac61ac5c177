// Errors as values. Every fallible delayq call returns a Status or a Result<T>.
//
// Expected outcomes (a job that is not there, a receipt whose delivery is over) are codes,
// not exceptions; HttpStatusOf() and the CLI's exit codes map them in one place each.
// Broken invariants inside delayq are bugs and are asserted (DELAYQ_DCHECK), not returned: in a
// debug build (NDEBUG unset, as the sanitizer builds are) a broken one aborts with its
// condition, file and line; a release build does not check.
//
// Threads: a Status or Result is a plain value; distinct objects may be used on distinct
// threads freely, one object as any standard value type.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace delayq {
namespace detail {
[[noreturn]] inline void CheckFailed(const char* condition, std::string_view why, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: delayq invariant broken: %s (%.*s)\n", file, line, condition,
               static_cast<int>(why.size()), why.data());
  std::abort();
}
}  // namespace detail
}  // namespace delayq

#ifdef NDEBUG
#define DELAYQ_DCHECK(condition, why) static_cast<void>(0)
#else
#define DELAYQ_DCHECK(condition, why) \
  ((condition) ? static_cast<void>(0) : ::delayq::detail::CheckFailed(#condition, (why), __FILE__, __LINE__))
#endif

namespace delayq {

enum class Code {
  kOk = 0,
  kInvalidArgument,    // the request is malformed; the message names the field and what is allowed
  kNotFound,           // the queue, job or key does not exist (any more)
  kConflict,           // the job is in a state that does not allow the operation (e.g. reserved)
  kLeaseExpired,       // the receipt names a delivery that is no longer current
  kTooLarge,           // payload, body or batch over its limit
  kResourceExhausted,  // overload; try again later
  kUnavailable,        // the store cannot be reached / is shutting down; try again later
  kIoError,            // the store failed to read or write; nothing was applied
  kCorruption,         // stored data could not be decoded
  kInternal,           // a bug
  kUnauthenticated,    // the server wants a bearer token and got none or a wrong one
};

// Stable snake_case name of a code, as used on the wire ("invalid_argument", "lease_expired").
// `code` must be one of the enumerators (asserted).
std::string_view CodeName(Code code);
// Parses a CodeName back; kInternal for unknown names.
Code CodeFromName(std::string_view name);

// ok, or a code with a message that says what was wrong and what would be right. Invariant: an ok
// Status has no message, and the code is one of the enumerators (asserted).
class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {
    DELAYQ_DCHECK(code_ >= Code::kOk && code_ <= Code::kUnauthenticated, "a Status with a code that is none of Code's");
    DELAYQ_DCHECK(code_ != Code::kOk || message_.empty(), "an ok Status with a message: " + message_);
  }

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
  static Status LeaseExpired(std::string m) { return {Code::kLeaseExpired, std::move(m)}; }
  static Status TooLarge(std::string m) { return {Code::kTooLarge, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status IoError(std::string m) { return {Code::kIoError, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "lease_expired: the receipt ..." (or "ok").
  std::string ToString() const;

  bool operator==(Code c) const { return code_ == c; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
//
// value(), * and -> need ok(): on an error they are a bug, and a debug build aborts there with
// the error's message (a release build does not check: test ok() first). A Result made from an
// ok Status is a bug too (asserted); a release build turns it into kInternal.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    DELAYQ_DCHECK(!status_.ok(), "a Result made from an ok Status, without a value");
    if (status_.ok()) status_ = Status::Internal("Result constructed from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  Code code() const { return status_.code(); }

  T& value() & { return Checked(), *value_; }
  const T& value() const& { return Checked(), *value_; }
  T value() && { return Checked(), std::move(*value_); }  // by value: safe on temporaries
  T* operator->() { return Checked(), &*value_; }
  const T* operator->() const { return Checked(), &*value_; }
  T& operator*() & { return Checked(), *value_; }
  const T& operator*() const& { return Checked(), *value_; }
  T operator*() && { return Checked(), std::move(*value_); }  // `for (auto& x : *f())` stays valid

 private:
  void Checked() const {
    DELAYQ_DCHECK(value_.has_value(), "the value of a Result that holds an error: " + status_.ToString());
  }

  std::optional<T> value_;
  Status status_;
};

}  // namespace delayq

// Returns early from the enclosing function when `expr` (a Status) is not ok.
#define DELAYQ_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::delayq::Status delayq_status_ = (expr);        \
    if (!delayq_status_.ok()) return delayq_status_; \
  } while (0)
