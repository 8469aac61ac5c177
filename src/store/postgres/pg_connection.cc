#include "store/postgres/pg_connection.h"

#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "core/percent.h"
#include "core/redact.h"

namespace delayq::postgres {
namespace {

std::string Field(const PGresult* r, int code) {
  const char* v = PQresultErrorField(r, code);
  return v ? v : "";
}

}  // namespace

int64_t Rows::Int(int row, int col) const {
  if (IsNull(row, col)) return 0;
  return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10);
}

double Rows::Double(int row, int col) const {
  if (IsNull(row, col)) return 0;
  return std::strtod(PQgetvalue(r_.get(), row, col), nullptr);
}

std::string Rows::Bytes(int row, int col) const {
  std::string_view t = Text(row, col);
  std::string out;
  if (t.size() < 2 || t[0] != '\\' || t[1] != 'x') return out;
  out.reserve((t.size() - 2) / 2);
  for (size_t i = 2; i + 1 < t.size(); i += 2) {
    out.push_back(static_cast<char>(HexValue(t[i]) << 4 | HexValue(t[i + 1])));
  }
  return out;
}

std::string RedactUrl(std::string_view url) { return RedactSecrets(url); }

namespace {

size_t SchemeLength(std::string_view url) {
  for (std::string_view scheme : {"postgres://", "postgresql://"}) {
    if (url.size() >= scheme.size() && std::equal(scheme.begin(), scheme.end(), url.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        })) {
      return scheme.size();
    }
  }
  return 0;
}

// The URL as libpq reads it: its scheme in lower case.
std::string ForLibpq(std::string_view url) {
  std::string out(url);
  const size_t n = SchemeLength(url);
  std::transform(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), out.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  return out;
}

}  // namespace

bool IsPostgresUrl(std::string_view url) { return SchemeLength(url) > 0; }

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& url, int connect_timeout_s) {
  const std::string timeout = std::to_string(connect_timeout_s);
  // The URI comes last and is expanded (expand_dbname): its own parameters override these defaults.
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const std::string dbname = ForLibpq(url);
  const char* values[] = {timeout.c_str(), "delayq", dbname.c_str(), nullptr};
  PGconn* c = PQconnectdbParams(keys, values, 1);
  if (c == nullptr) return Status::Unavailable("cannot allocate a PostgreSQL connection");
  if (PQstatus(c) != CONNECTION_OK) {
    std::string why = PQerrorMessage(c);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    PQfinish(c);
    return Status::Unavailable(
        fmt::format("cannot connect to PostgreSQL at {}: {}", RedactUrl(url), RedactSecretsIn(why, url)));
  }
  // The session as delayq's statements expect it, whatever the database's, the role's or the URL's
  // own options= say (a URL's options replaced these when they were startup options: a review
  // found a delete of a queue under REPEATABLE READ that missed the jobs it had waited for): bytea
  // as hex (Rows::Bytes reads that), READ COMMITTED (SKIP LOCKED, the key rules and DeleteQueue
  // rely on it), and only pg_catalog on the search path (every delayq name is schema-qualified, so
  // no function another role put in public can stand in for a built-in). A lock another
  // transaction holds is waited for at most kLockTimeout unless the role, the database or the URL
  // set a lock_timeout of their own: an application's transaction left open after it enqueued
  // with a key (or made a queue, or locked a job) held every request that met it, and enough of
  // them held every one of the server's threads, /healthz and SIGTERM included. Past it the
  // request answers 503 (ToStatus, 55P03) and changes nothing.
  const std::string session = fmt::format(
      "SET search_path = pg_catalog, pg_temp; SET bytea_output = hex; "
      "SET default_transaction_isolation = 'read committed'; "
      "SELECT pg_catalog.set_config('lock_timeout', '{}ms', false) "
      "WHERE pg_catalog.current_setting('lock_timeout') OPERATOR(pg_catalog.=) '0'",
      kLockTimeoutMs);
  PGresult* set = PQexec(c, session.c_str());
  const bool session_ok = PQresultStatus(set) == PGRES_TUPLES_OK;
  std::string set_error = session_ok ? "" : PQerrorMessage(c);
  PQclear(set);
  if (!session_ok) {
    PQfinish(c);
    return Status::Unavailable(
        fmt::format("cannot set up the PostgreSQL session at {}: {}", RedactUrl(url), RedactSecretsIn(set_error, url)));
  }
  // The server's notices (a connection ended by an administrator, a shutdown) go to the log at
  // debug, not to stderr: the store reports what they mean through its Statuses.
  PQsetNoticeProcessor(
      c, [](void*, const char* message) { spdlog::debug("PostgreSQL: {}", message); }, nullptr);
  return std::unique_ptr<Connection>(new Connection(c));
}

Connection::~Connection() { PQfinish(conn_); }

bool Connection::broken() const { return PQstatus(conn_) != CONNECTION_OK; }

// An idle connection that does not LISTEN hears nothing until it asks: anything to read (or a
// hang-up) is the server's FATAL goodbye and the end of the stream, or something as strange.
// libpq would read the goodbye as a notice and call the connection fine until the next read, so
// the pool drops such a connection instead of reading it.
bool Connection::LooksAlive() const {
  if (broken()) return false;
  pollfd fd{socket(), POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&fd, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready == 0;
}

Status Connection::Failed(PGresult* r, std::string_view sql) {
  last_error_ = {};
  if (r != nullptr) {
    last_error_ = {Field(r, PG_DIAG_SQLSTATE), Field(r, PG_DIAG_MESSAGE_PRIMARY), Field(r, PG_DIAG_MESSAGE_DETAIL)};
    PQclear(r);
  }
  if (last_error_.sqlstate.empty() || broken()) {
    std::string why = PQerrorMessage(conn_);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    last_error_.sqlstate = "08006";
    if (last_error_.message.empty()) last_error_.message = why.empty() ? "the connection was lost" : why;
  }
  (void)sql;
  return ToStatus(last_error_);
}

Result<Rows> Connection::Exec(std::string_view sql, const std::vector<Param>& params) {
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size()), formats(params.size());
  std::vector<Oid> types(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i].null ? nullptr : params[i].value.data();
    lengths[i] = static_cast<int>(params[i].value.size());
    formats[i] = params[i].bytes ? 1 : 0;
    types[i] = params[i].bytes ? 17 : 0;  // bytea; the rest as the statement says
  }
  const std::string text(sql);
  PGresult* r = PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), types.data(), values.data(),
                             lengths.data(), formats.data(), 0);
  const auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) return Failed(r, sql);
  return Rows(r);
}

Status Connection::Run(std::string_view sql) {
  const std::string text(sql);
  PGresult* r = PQexec(conn_, text.c_str());
  const auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) return Failed(r, sql);
  PQclear(r);
  return Status::Ok();
}

Status ToStatus(const ServerError& e) {
  const std::string& s = e.sqlstate;
  if (s == "22023") return Status::InvalidArgument(e.message);
  if (s == "DQ413") return Status::TooLarge(e.message);
  if (s == "DQ429") return Status::ResourceExhausted(e.message);
  if (s == "DQ409" || s == "55000") return Status::Conflict(e.message);
  // Another transaction got in the way (a serialization failure, a deadlock): nothing was
  // applied, and the same call again can succeed.
  if (s == "40001" || s == "40P01") return Status::Unavailable("PostgreSQL: " + e.message + "; try again");
  if (s == "55P03") {
    return Status::Unavailable(
        "PostgreSQL: another transaction has held a lock this request needs for longer than lock_timeout (" +
        e.message +
        "): most likely an application transaction that enqueued into this queue or with this key, or "
        "cancelled or rescheduled this job, and has not ended; nothing was changed: try again once it commits "
        "or rolls back");
  }
  // Connection exceptions, a server shutting down or out of resources.
  if (s.rfind("08", 0) == 0 || s.rfind("57P", 0) == 0 || s.rfind("53", 0) == 0) {
    return Status::Unavailable("PostgreSQL: " + e.message);
  }
  return Status::IoError(fmt::format("PostgreSQL error {}: {}", s, e.message));
}

namespace {

// PostgreSQL's refusals of one connection more than it allows (the role's or database's
// CONNECTION LIMIT, max_connections, the slots kept for superusers). libpq gives a failed
// connection no SQLSTATE, so this reads the server's English text: with lc_messages in another
// language the refusal is answered (503) as before, not waited out.
bool TooManyConnections(const Status& s) {
  const std::string& m = s.message();
  return m.find("too many connections") != std::string::npos || m.find("too many clients") != std::string::npos ||
         m.find("remaining connection slots") != std::string::npos;
}

}  // namespace

Result<Pool::Lease> Pool::Take(bool wait_at_limit) {
  std::vector<std::unique_ptr<Connection>> ended;  // closed once the lock is let go
  std::unique_lock lock(mu_);
  // At PostgreSQL's limit a request waits for a pooled connection at most this long (the
  // connections may be held by a vacuum, a long delete, or requests waiting out lock_timeout).
  const auto deadline = Clock::now() + std::chrono::seconds(std::max(connect_timeout_s_, 1));
  for (;;) {
    if (cap_ < max_ && Clock::now() >= cap_until_) {  // try for the whole pool again
      cap_ = max_;
      cv_.notify_all();
    }
    const auto until = cap_ < max_ ? std::min(cap_until_, deadline) : Clock::time_point::max();
    if (!cv_.wait_until(lock, until, [&] { return !idle_.empty() || lent_ < cap_; })) {
      if (Clock::now() < deadline) continue;  // the cap's minute is over: try again
      return Status::Unavailable(fmt::format(
          "PostgreSQL takes no more connections and none of the {} this server holds came free within {} s; try "
          "again (a server holds 17 connections: raise the role's CONNECTION LIMIT or max_connections)",
          lent_, std::max(connect_timeout_s_, 1)));
    }
    while (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      if (!c->LooksAlive()) {  // dropped: its place goes to a new one
        ended.push_back(std::move(c));
        continue;
      }
      ++lent_;
      lock.unlock();
      return Lease(this, std::move(c));
    }
    if (lent_ >= cap_) continue;  // the idle ones were dropped, and the pool is at its cap
    ++lent_;
    lock.unlock();
    ended.clear();
    auto c = Connection::Open(url_, connect_timeout_s_);
    lock.lock();
    if (c.ok()) {
      lock.unlock();
      return Lease(this, std::move(*c));
    }
    --lent_;
    cv_.notify_one();
    // PostgreSQL takes no more connections (a role's CONNECTION LIMIT under the pool's size, found
    // by a hostile pass: half the requests answered 503). While others are open, the pool keeps to
    // them for a while and this request waits for one, as any pool at its size does.
    const size_t open = lent_ + idle_.size();
    if (!TooManyConnections(c.status()) || open == 0) return c.status();
    const bool lowered = cap_ != open;
    cap_ = open;
    cap_until_ = Clock::now() + std::chrono::minutes(1);
    if (!wait_at_limit) return c.status();
    if (lowered) {
      spdlog::warn("PostgreSQL takes no more connections ({}): the pool keeps to the {} it has for a minute",
                   c.status().message(), open);
    }
  }
}

void Pool::Give(std::unique_ptr<Connection> c) {
  std::lock_guard lock(mu_);
  --lent_;
  if (!c->broken()) idle_.push_back(std::move(c));
  cv_.notify_one();
}

}  // namespace delayq::postgres
