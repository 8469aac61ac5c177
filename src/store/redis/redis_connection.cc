#include "store/redis/redis_connection.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "store/redis/redis_client.h"

namespace delayq::redis {

Value ReplyToValue(const void* reply) {
  const auto* r = static_cast<const redisReply*>(reply);
  Value v;
  if (!r) return v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = Value::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = Value::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = Value::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = Value::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = Value::kArray;
      v.array.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) v.array.push_back(ReplyToValue(r->element[i]));
      break;
    default: break;
  }
  return v;
}

namespace {

using SteadyClock = std::chrono::steady_clock;

int MsLeft(SteadyClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// What OpenSSL's error queue says, emptied (the first error names the cause).
std::string SslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (out.empty()) out = buf;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

// OpenSSL's socket BIO writes with write(), so a TLS write to a connection Redis has closed raises
// SIGPIPE, which ends the process unless it ignores the signal (a library must not count on that).
// OpenSSL has no flag for it: this BIO is the socket BIO with send(MSG_NOSIGNAL) as its write, as
// libpq's is (fe-secure-openssl.c, my_BIO_s_socket).
int SendWithoutSignal(BIO* bio, const char* data, int size) {
  const int fd = static_cast<int>(BIO_get_fd(bio, nullptr));
  const ssize_t n = ::send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL);
  const int error = errno;
  BIO_clear_retry_flags(bio);
  if (n < 0 && (error == EAGAIN || error == EWOULDBLOCK || error == EINTR)) BIO_set_retry_write(bio);
  errno = error;  // for SSL_ERROR_SYSCALL's reader
  return static_cast<int>(n);
}

const BIO_METHOD* SocketWithoutSignal() {
  static BIO_METHOD* const method = [] {
    const BIO_METHOD* socket = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "delayq socket");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, SendWithoutSignal);
    // The socket BIO's own read, control, create and destroy (OpenSSL 3.5 deprecates the getters;
    // Debian 12 has 3.0, and libpq uses them the same way).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    BIO_meth_set_read(m, BIO_meth_get_read(socket));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(socket));
    BIO_meth_set_create(m, BIO_meth_get_create(socket));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(socket));
#pragma GCC diagnostic pop
    return m;
  }();
  return method;
}

// Why an SSL_read or SSL_write failed with `error` (SSL_get_error): OpenSSL's queue, or the
// socket's errno when the failure was the system's (a reset, a broken pipe).
std::string SslFailure(int error) {
  const int saved = errno;
  if (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    return saved != 0 ? std::strerror(saved) : "the connection ended";
  }
  return SslErrors();
}

bool IsIpAddress(const std::string& host) {
  in6_addr v6;
  in_addr v4;
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace

class RedisTls {
 public:
  explicit RedisTls(RedisTlsOptions options) : options_(std::move(options)) {}
  ~RedisTls() {
    if (ctx_) SSL_CTX_free(ctx_);
  }
  Status Init() {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (!ctx_) return Status::Internal("OpenSSL could not make a TLS context: " + SslErrors());
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    if (!options_.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx_, options_.ca_file.c_str(), nullptr) != 1) {
        return Status::InvalidArgument(
            fmt::format("cannot use the Redis CA file \"{}\" (?ca=): {}", options_.ca_file, SslErrors()));
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
      return Status::Internal("OpenSSL could not load the system's CAs: " + SslErrors());
    }
    if (options_.cert_file.empty() != options_.key_file.empty()) {
      return Status::InvalidArgument("a Redis client certificate needs both ?cert=FILE and ?key=FILE, or neither");
    }
    if (!options_.cert_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(ctx_, options_.cert_file.c_str()) != 1) {
        return Status::InvalidArgument(fmt::format("cannot use the Redis client certificate \"{}\" (?cert=): {}",
                                                   options_.cert_file, SslErrors()));
      }
      if (SSL_CTX_use_PrivateKey_file(ctx_, options_.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_check_private_key(ctx_) != 1) {
        return Status::InvalidArgument(fmt::format(
            "cannot use the key \"{}\" (?key=) of the Redis client certificate: {} (a PEM key matching ?cert=)",
            options_.key_file, SslErrors()));
      }
    }
    SSL_CTX_set_verify(ctx_, options_.insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
    return Status::Ok();
  }
  SSL_CTX* ctx() const { return ctx_; }
  const RedisTlsOptions& options() const { return options_; }

 private:
  RedisTlsOptions options_;
  SSL_CTX* ctx_ = nullptr;
};

Result<std::shared_ptr<RedisTls>> MakeRedisTls(const RedisTlsOptions& options) {
  auto tls = std::make_shared<RedisTls>(options);
  DELAYQ_RETURN_IF_ERROR(tls->Init());
  return tls;
}

struct RedisConnection::Impl {
  int fd = -1;
  SSL* ssl = nullptr;
  redisReader* reader = nullptr;
  std::string where;  // "host:port", for messages

  ~Impl() {
    if (ssl) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
    if (reader) redisReaderFree(reader);
  }

  // Waits until the socket is ready for `events` or the deadline; false when it passed.
  bool Wait(short events, SteadyClock::time_point deadline) {
    while (true) {
      pollfd p{fd, events, 0};
      const int n = ::poll(&p, 1, MsLeft(deadline));
      if (n > 0) return true;
      if (n == 0) return false;
      if (errno != EINTR) return false;
    }
  }

  Status Connect(const Endpoint& node, int timeout_ms) {
    where = node.ToString();
    const auto deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(node.host.c_str(), std::to_string(node.port).c_str(), &hints, &found);
    if (rc != 0) return Status::Unavailable(fmt::format("cannot reach Redis at {}: {}", where, gai_strerror(rc)));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, freeaddrinfo);
    std::string why = "no address";
    for (addrinfo* a = found; a; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 || (errno == EINPROGRESS && Wait(POLLOUT, deadline))) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == 0) {
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
          return Status::Ok();
        }
        why = std::strerror(err);
      } else {
        why = errno == EINPROGRESS ? fmt::format("no answer within {} ms", timeout_ms) : std::strerror(errno);
      }
      ::close(fd);
      fd = -1;
    }
    return Status::Unavailable(fmt::format("cannot reach Redis at {}: {}", where, why));
  }

  Status Handshake(const RedisTls& tls, const std::string& host, int timeout_ms) {
    const auto deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
    ssl = SSL_new(tls.ctx());
    BIO* bio = ssl != nullptr && SocketWithoutSignal() != nullptr ? BIO_new(SocketWithoutSignal()) : nullptr;
    if (bio == nullptr) return Status::Internal("OpenSSL could not make a connection: " + SslErrors());
    BIO_set_fd(bio, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, bio, bio);  // the SSL owns it now
    const std::string name = tls.options().server_name.empty() ? host : tls.options().server_name;
    if (!IsIpAddress(name)) SSL_set_tlsext_host_name(ssl, name.c_str());
    if (!tls.options().insecure) {
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      if (IsIpAddress(name)) {
        X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
      } else {
        X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
      }
    }
    while (true) {
      const int r = SSL_connect(ssl);
      if (r == 1) return Status::Ok();
      const int e = SSL_get_error(ssl, r);
      if ((e == SSL_ERROR_WANT_READ && Wait(POLLIN, deadline)) ||
          (e == SSL_ERROR_WANT_WRITE && Wait(POLLOUT, deadline))) {
        continue;
      }
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        return Status::Unavailable(
            fmt::format("the TLS handshake with Redis at {} did not finish within {} ms "
                        "(is it serving TLS on that port? rediss:// is for a tls-port)",
                        where, timeout_ms));
      }
      const long verify = SSL_get_verify_result(ssl);
      if (verify != X509_V_OK) {
        return Status::Unavailable(fmt::format(
            "the TLS certificate of Redis at {} is not trusted: {} (give its CA with ?ca=FILE, or the name it carries "
            "with ?server_name=NAME)",
            where, X509_verify_cert_error_string(verify)));
      }
      return Status::Unavailable(fmt::format(
          "the TLS handshake with Redis at {} failed: {} (is it serving TLS there, and does it want a client "
          "certificate: ?cert=FILE&key=FILE?)",
          where, SslErrors()));
    }
  }

  Status WriteAll(const std::string& data, SteadyClock::time_point deadline) {
    size_t done = 0;
    while (done < data.size()) {
      if (ssl) {
        const int n =
            SSL_write(ssl, data.data() + done, static_cast<int>(std::min<size_t>(data.size() - done, 1 << 30)));
        if (n > 0) {
          done += static_cast<size_t>(n);
          continue;
        }
        const int e = SSL_get_error(ssl, n);
        if ((e == SSL_ERROR_WANT_WRITE && Wait(POLLOUT, deadline)) ||
            (e == SSL_ERROR_WANT_READ && Wait(POLLIN, deadline))) {
          continue;
        }
        return Lost(e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ ? "no room to send within the timeout"
                                                                          : SslFailure(e));
      }
      const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!Wait(POLLOUT, deadline)) return Lost("no room to send within the timeout");
      } else {
        return Lost(std::strerror(errno));
      }
    }
    return Status::Ok();
  }

  // Reads what has come into the reader: 1 some, 0 the deadline passed, -1 broken (`why`).
  int ReadSome(SteadyClock::time_point deadline, std::string* why) {
    char buf[16384];
    while (true) {
      ssize_t n;
      if (ssl) {
        const int r = SSL_read(ssl, buf, sizeof buf);
        if (r > 0) {
          n = r;
        } else {
          const int e = SSL_get_error(ssl, r);
          if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (!Wait(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) return 0;
            continue;
          }
          *why = e == SSL_ERROR_ZERO_RETURN ? "Redis closed the connection" : SslFailure(e);
          return -1;
        }
      } else {
        n = ::recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          if (!Wait(POLLIN, deadline)) return 0;
          continue;
        }
        if (n <= 0) {
          *why = n == 0 ? "Redis closed the connection" : std::strerror(errno);
          return -1;
        }
      }
      if (redisReaderFeed(reader, buf, static_cast<size_t>(n)) != REDIS_OK) {
        *why = "hiredis could not take the bytes";
        return -1;
      }
      return 1;
    }
  }

  Status Lost(const std::string& why) {
    return Status::Unavailable(fmt::format("lost the connection to Redis at {}: {}", where, why));
  }
};

RedisConnection::RedisConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisConnection::~RedisConnection() = default;

namespace {

// AUTH's refusal in words that say what to do, without the password.
Status AuthRefused(const std::string& where, const RedisAuth& auth, const std::string& reply) {
  const std::string who = auth.user.empty() ? "the default user" : fmt::format("user \"{}\"", auth.user);
  if (reply.rfind("WRONGPASS", 0) == 0) {
    return Status::Unauthenticated(fmt::format(
        "Redis at {} refused the password of {} (WRONGPASS: a wrong password, an unknown user, or a disabled one); "
        "give them in the URL (redis://USER:PASSWORD@HOST:PORT) or with --redis-password-file / "
        "DELAYQ_REDIS_PASSWORD",
        where, who));
  }
  if (reply.find("without any password configured") != std::string::npos) {
    return Status::Unauthenticated(fmt::format(
        "Redis at {} has no password set for {}, yet one was given: drop it from the URL, or set one in Redis "
        "(requirepass, or an ACL user)",
        where, who));
  }
  return Status::Unauthenticated(fmt::format("Redis at {} refused AUTH for {}: {}", where, who, reply.substr(0, 200)));
}

}  // namespace

Result<std::unique_ptr<RedisConnection>> RedisConnection::Open(const Endpoint& node, const RedisAuth& auth,
                                                               const RedisTls* tls, int timeout_ms) {
  auto impl = std::make_unique<Impl>();
  impl->reader = redisReaderCreate();
  if (!impl->reader) return Status::Internal("hiredis could not make a reader");
  DELAYQ_RETURN_IF_ERROR(impl->Connect(node, timeout_ms));
  if (tls) DELAYQ_RETURN_IF_ERROR(impl->Handshake(*tls, node.host, timeout_ms));
  auto c = std::unique_ptr<RedisConnection>(new RedisConnection(std::move(impl)));
  // Log in, then one command that needs it: a Redis that wants a password says NOAUTH now, not
  // at the first command of a request.
  std::vector<std::vector<std::string>> hello;
  if (!auth.password.empty()) {
    hello.push_back(auth.user.empty() ? std::vector<std::string>{"AUTH", auth.password}
                                      : std::vector<std::string>{"AUTH", auth.user, auth.password});
  }
  if (auth.db != 0) hello.push_back({"SELECT", std::to_string(auth.db)});
  hello.push_back({"PING"});
  DELAYQ_RETURN_IF_ERROR(c->Send(hello));
  const std::string& where = c->impl_->where;
  for (size_t i = 0; i < hello.size(); ++i) {
    auto r = c->Read(timeout_ms);
    if (!r.ok()) return r.status();
    const Value& v = **r;
    if (!v.is_error()) continue;
    if (hello[i][0] == "AUTH") return AuthRefused(where, auth, v.str);
    if (v.str.rfind("NOAUTH", 0) == 0) {
      return Status::Unauthenticated(
          fmt::format("Redis at {} needs a password (NOAUTH): give it in the URL (redis://:PASSWORD@HOST:PORT, or "
                      "USER:PASSWORD@ for an ACL user) or with --redis-password-file / DELAYQ_REDIS_PASSWORD",
                      where));
    }
    if (hello[i][0] == "SELECT") {
      return Status::InvalidArgument(
          fmt::format("Redis at {} refused database {} (the URL's /{}): {}", where, auth.db, auth.db, v.str));
    }
    // A replica that lost its master, or one still loading: usable later, say why now.
    if (v.str.rfind("LOADING", 0) == 0 || v.str.rfind("MASTERDOWN", 0) == 0 || v.str.rfind("BUSY", 0) == 0) {
      return Status::Unavailable(fmt::format("Redis at {} cannot serve yet: {}", where, v.str.substr(0, 200)));
    }
    return Status::Unavailable(fmt::format("Redis at {} answered PING with: {}", where, v.str.substr(0, 200)));
  }
  return c;
}

Status RedisConnection::Send(const std::vector<std::vector<std::string>>& commands) {
  std::string out;
  for (const auto& argv : commands) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    const long long n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), ptrs.data(), lens.data());
    if (n < 0 || !cmd) return Status::Internal("hiredis could not format a command");
    out.append(cmd, static_cast<size_t>(n));
    redisFreeCommand(cmd);
  }
  // Sending has the read timeout's order: 30 s is far beyond any send to a live Redis.
  return impl_->WriteAll(out, SteadyClock::now() + std::chrono::seconds(30));
}

Result<std::optional<Value>> RedisConnection::Read(int timeout_ms, bool idle_ok) {
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    void* reply = nullptr;
    if (redisReaderGetReply(impl_->reader, &reply) != REDIS_OK) {
      return impl_->Lost(fmt::format("not RESP: {}", impl_->reader->errstr));
    }
    if (reply) {
      Value v = ReplyToValue(reply);
      freeReplyObject(reply);
      return std::optional<Value>(std::move(v));
    }
    std::string why;
    const int got = impl_->ReadSome(deadline, &why);
    if (got < 0) return impl_->Lost(why);
    if (got == 0) {
      if (idle_ok) return std::optional<Value>{};
      return impl_->Lost(fmt::format("no answer within {} ms", timeout_ms));
    }
  }
}

// Reading only: over TLS, the failed read sends an alert, which a shut writing side would refuse.
void RedisConnection::Interrupt() { (void)::shutdown(impl_->fd, SHUT_RD); }

bool RedisConnection::StillOpen() {
  if (impl_->ssl && SSL_pending(impl_->ssl) > 0) return false;  // stray bytes: not a clean idle connection
  char byte;
  const ssize_t n = ::recv(impl_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  // Over TLS Redis may send records on an idle connection (TLS 1.3 session tickets); only an end
  // or an error counts there.
  if (impl_->ssl && n > 0) return true;
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace delayq::redis
