// Connections to PostgreSQL over libpq: one statement at a time with typed parameters, the
// server's errors turned into delayq Statuses, and a pool the store's threads share.
//
// Parameters go as text, except bytea ones (binary: a payload is sent as its bytes, not escaped).
// Results come as text; Bytes() decodes a bytea column's hex form.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::postgres {

// One parameter of a statement: text, NULL, or bytes (sent binary, for a bytea).
struct Param {
  std::string value;
  bool null = false;
  bool bytes = false;
  static Param Null() { return {{}, true, false}; }
  static Param Bytes(std::string b) { return {std::move(b), false, true}; }
  static Param Of(std::string_view s) { return {std::string(s), false, false}; }
  static Param Of(const char* s) { return {std::string(s), false, false}; }  // not the bool overload
  static Param Of(int64_t v) { return {std::to_string(v), false, false}; }
  static Param Of(bool v) { return {v ? "t" : "f", false, false}; }
  template <typename T>
  static Param Maybe(const std::optional<T>& v) {
    return v ? Of(static_cast<int64_t>(*v)) : Null();
  }
};

// The rows a statement answered (owned; freed with it).
class Rows {
 public:
  Rows() = default;
  explicit Rows(PGresult* r) : r_(r, &PQclear) {}
  int size() const { return r_ ? PQntuples(r_.get()) : 0; }
  bool empty() const { return size() == 0; }
  bool IsNull(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  std::string_view Text(int row, int col) const {
    return {PQgetvalue(r_.get(), row, col), static_cast<size_t>(PQgetlength(r_.get(), row, col))};
  }
  std::string Str(int row, int col) const { return std::string(Text(row, col)); }
  int64_t Int(int row, int col) const;  // 0 when NULL
  double Double(int row, int col) const;
  bool Bool(int row, int col) const { return Text(row, col) == "t"; }
  // A bytea column (its text form "\x<hex>") as its bytes.
  std::string Bytes(int row, int col) const;

 private:
  std::shared_ptr<PGresult> r_;
};

// An error the server raised: its SQLSTATE, message and detail.
struct ServerError {
  std::string sqlstate, message, detail;
};

class Connection {
 public:
  // Connects to a libpq URI (postgres://user:pass@host:port/db?sslmode=...) within connect_timeout_s.
  // kUnavailable (never naming the password) when the server cannot be reached or refuses.
  static Result<std::unique_ptr<Connection>> Open(const std::string& url, int connect_timeout_s);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one statement. An error the server raised is kept in last_error() and answered as
  // ToStatus() words it; a lost connection is kUnavailable (and broken() is true afterwards).
  Result<Rows> Exec(std::string_view sql, const std::vector<Param>& params = {});
  // Runs statements without parameters (BEGIN, COMMIT, a migration's text).
  Status Run(std::string_view sql);
  const ServerError& last_error() const { return last_error_; }
  bool broken() const;
  // Whether an idle connection still looks usable, without a round trip: one the server ended
  // meanwhile (a restart, pg_terminate_backend) has said so and closed its socket.
  bool LooksAlive() const;
  // The socket, for waiting on notifications (Listen).
  int socket() const { return PQsocket(conn_); }
  PGconn* raw() { return conn_; }

 private:
  explicit Connection(PGconn* c) : conn_(c) {}
  Status Failed(PGresult* r, std::string_view sql);
  PGconn* conn_;
  ServerError last_error_;
};

// The Status for a server error: 22023 kInvalidArgument, DQ413 kTooLarge, DQ429
// kResourceExhausted, DQ409 and 55000 kConflict, 40001/40P01 kAborted-like kUnavailable (try
// again), connection classes kUnavailable, the rest kIoError; the message is the server's.
Status ToStatus(const ServerError& e);

// The URL with its password replaced by "***", for logs and errors.
std::string RedactUrl(std::string_view url);

// Whether url names PostgreSQL: postgres:// or postgresql://, in any case (a URI's scheme is
// case-insensitive, RFC 3986 §3.1; libpq knows only the lower-case ones, so Connection::Open
// lowers it).
bool IsPostgresUrl(std::string_view url);

// How long a statement of delayq's waits for a lock another transaction holds (lock_timeout),
// unless the role, the database or the URL's options set one (docs/postgres.md).
inline constexpr int64_t kLockTimeoutMs = 5000;

// Connections the store's threads share: Take() lends one (opening one when none is idle, at
// most `max` at once; beyond that it waits; when PostgreSQL refuses one more, "too many
// connections", it keeps to those it has for a minute and waits for one of them). A lent connection comes back when its
// Lease ends, unless it broke (then a new one is opened next time). An idle one the server ended meanwhile is dropped
// when it would be lent, instead of failing the request that got it: a PostgreSQL restart used to fail one request per
// pooled connection.
class Pool {
 public:
  Pool(std::string url, size_t max, int connect_timeout_s)
      : url_(std::move(url)), max_(max), connect_timeout_s_(connect_timeout_s), cap_(max) {}
  class Lease {
   public:
    Lease(Pool* pool, std::unique_ptr<Connection> c) : pool_(pool), c_(std::move(c)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = default;
    ~Lease() {
      if (pool_ && c_) pool_->Give(std::move(c_));
    }
    Connection* operator->() { return c_.get(); }
    Connection& operator*() { return *c_; }

   private:
    Pool* pool_ = nullptr;
    std::unique_ptr<Connection> c_;
  };
  // wait_at_limit false: PostgreSQL's refusal of one more connection is answered, not waited out
  // (the pool's warm-up, which holds every connection it opened).
  Result<Lease> Take(bool wait_at_limit = true);
  const std::string& url() const { return url_; }

 private:
  void Give(std::unique_ptr<Connection> c);
  const std::string url_;
  const size_t max_;
  const int connect_timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  size_t lent_ = 0;
  // At most this many at once: max_, or fewer for a minute after PostgreSQL refused one more.
  using Clock = std::chrono::steady_clock;
  size_t cap_;
  Clock::time_point cap_until_{};
};

// Runs `body` in a transaction on `c`: BEGIN, body, COMMIT (ROLLBACK when body fails).
template <typename Body>
auto InTransaction(Connection& c, Body&& body) -> decltype(body()) {
  if (Status s = c.Run("BEGIN"); !s.ok()) return s;
  auto out = body();
  if (!out.ok()) {
    if (!c.broken()) (void)c.Run("ROLLBACK");
    return out;
  }
  if (Status s = c.Run("COMMIT"); !s.ok()) return s;
  return out;
}

}  // namespace delayq::postgres
