// Errors as values. Every fallible delayq call returns a Status or a Result<T>.
//
// Expected outcomes (a job that is not there, a receipt whose delivery is over) are codes,
// not exceptions; HttpStatusOf() and the CLI's exit codes map them in one place each.
// Broken invariants inside delayq are bugs and are asserted, not returned.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

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
std::string_view CodeName(Code code);
// Parses a CodeName back; kInternal for unknown names.
Code CodeFromName(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

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
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("Result constructed from an ok Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  Code code() const { return status_.code(); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T value() && { return std::move(*value_); }  // by value: safe on temporaries
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T operator*() && { return std::move(*value_); }  // `for (auto& x : *f())` stays valid

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace delayq

// Returns early from the enclosing function when `expr` (a Status) is not ok.
#define DELAYQ_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::delayq::Status delayq_status_ = (expr);  \
    if (!delayq_status_.ok()) return delayq_status_; \
  } while (0)
