// Boost.Beast (client side) lives in this file only.
#include <utility>  // before Asio with -std=c++20 on GCC 12 (see DEPENDENCIES.md)

#include "client/http_connection.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/socket.h>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace delayq::client {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

struct HttpConnectionPool::Tls {
  net::ssl::context context{net::ssl::context::tls_client};
  std::string server_name;  // sent by SNI (unless an IP address) and checked in the certificate
};

// A request's deadline. Blocking reads and writes on an Asio socket ignore SO_RCVTIMEO: Asio takes
// the EAGAIN it causes for "not ready yet" and polls without end, so a server that never answered
// held the caller forever. Here one thread (started on first use) shuts a socket down when the
// call on it outlives its deadline, which ends the blocked read or write at once.
class HttpConnectionPool::DeadlineWatch {
 public:
  ~DeadlineWatch() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Watches `fd` until Disarm(token); past `ms` from now, shuts it down.
  uint64_t Arm(int fd, int64_t ms) {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    const uint64_t token = ++next_;
    armed_.emplace(token, Armed{fd, std::chrono::steady_clock::now() + std::chrono::milliseconds(ms), false});
    cv_.notify_all();
    return token;
  }
  // Stops watching; true when the deadline passed and the socket was shut down.
  bool Disarm(uint64_t token) {
    std::lock_guard lock(mu_);
    auto it = armed_.find(token);
    if (it == armed_.end()) return false;
    const bool fired = it->second.fired;
    armed_.erase(it);
    return fired;
  }

 private:
  struct Armed {
    int fd;
    std::chrono::steady_clock::time_point deadline;
    bool fired;
  };
  void Loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      auto next = std::chrono::steady_clock::time_point::max();
      const auto now = std::chrono::steady_clock::now();
      for (auto& [token, a] : armed_) {
        if (a.fired) continue;
        if (a.deadline <= now) {
          a.fired = true;
          ::shutdown(a.fd, SHUT_RDWR);  // the fd stays open (and armed) until its caller disarms it
        } else {
          next = std::min(next, a.deadline);
        }
      }
      if (next == std::chrono::steady_clock::time_point::max()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, next);
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Armed> armed_;
  uint64_t next_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class HttpConnectionPool::Connection {
 public:
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;
  std::unique_ptr<net::ssl::stream<tcp::socket&>> tls;  // https: TLS over `socket`

  // Runs `op` on the stream requests travel on: the TLS stream or the socket.
  template <class Op>
  auto OnStream(Op&& op) {
    return tls ? op(*tls) : op(socket);
  }

  // Whether an idle connection is still open: no end, no reset and no stray bytes are waiting
  // (a peek that would block). Nothing has been sent on it yet, so dropping it is always safe.
  bool StillOpen() {
    if (buffer.size() > 0) return false;
    char byte;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    // Over TLS the server may send records on an idle connection (TLS 1.3 session tickets);
    // they are read with the next answer, so only an end or an error counts there.
    if (tls && n > 0) return true;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
};

// What to do when the server refused this client's certificate (TLS 1.3 says so after the
// handshake, at the first read): else a refusal reads like a network failure.
namespace {
std::string CertificateHint(const std::string& error) {
  for (const char* alert :
       {"alert certificate required", "alert unknown ca", "alert bad certificate", "alert certificate expired",
        "alert certificate unknown", "alert unsupported certificate"}) {
    if (error.find(alert) != std::string::npos) {
      return " (the server refused this client's certificate, or wants one: give a client certificate its "
             "--tls-client-ca signed, valid now, with --client-cert/--client-key or ClientOptions::tls_cert_file)";
    }
  }
  return "";
}
}  // namespace

Result<std::unique_ptr<HttpConnectionPool::Tls>> HttpConnectionPool::MakeTls(const TlsOptions& o,
                                                                             const std::string& host) {
  auto tls = std::make_unique<Tls>();
  // An encrypted key would make OpenSSL ask for its pass phrase on the terminal: refuse it instead.
  tls->context.set_password_callback([](std::size_t, net::ssl::context::password_purpose) { return std::string(); });
  tls->context.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                           net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
  beast::error_code ec;
  if (o.ca_file.empty()) {
    tls->context.set_default_verify_paths(ec);
  } else {
    tls->context.load_verify_file(o.ca_file, ec);
  }
  if (ec) {
    return Status::InvalidArgument(fmt::format("cannot use the CA file \"{}\": {} (a PEM file is needed)",
                                               o.ca_file.empty() ? "(the system's)" : o.ca_file, ec.message()));
  }
  if (o.cert_file.empty() && !o.key_file.empty()) {
    return Status::InvalidArgument("a client key was given without its client certificate: give both, or neither");
  }
  if (!o.cert_file.empty()) {
    tls->context.use_certificate_chain_file(o.cert_file, ec);
    if (ec) {
      return Status::InvalidArgument(
          fmt::format("cannot use the client certificate \"{}\": {} (a PEM certificate chain is needed)", o.cert_file,
                      ec.message()));
    }
    const std::string& key = o.key_file.empty() ? o.cert_file : o.key_file;
    tls->context.use_private_key_file(key, net::ssl::context::pem, ec);
    // OpenSSL compares a key with the certificate only when both are of one type: an RSA key
    // beside an ECDSA certificate was taken, and the handshake failed later without a reason.
    if (!ec && SSL_CTX_check_private_key(tls->context.native_handle()) != 1) {
      ec = beast::error_code(static_cast<int>(ERR_get_error()), net::error::get_ssl_category());
    }
    if (ec) {
      return Status::InvalidArgument(
          fmt::format("cannot use the client key \"{}\": {} (the unencrypted PEM private key of the client certificate "
                      "is needed)",
                      key, ec.message()));
    }
  }
  tls->server_name = o.server_name.empty() ? host : o.server_name;
  return tls;
}

Result<std::unique_ptr<HttpConnectionPool>> HttpConnectionPool::Create(std::string_view url, std::string auth_token,
                                                                       int64_t timeout_ms,
                                                                       const TlsOptions& tls_options) {
  std::string_view rest = url;
  const bool https = rest.substr(0, 8) == "https://";
  if (rest.substr(0, 7) != "http://" && !https) {
    return Status::InvalidArgument(
        fmt::format("server URL \"{}\" must start with http:// or https:// (for example http://127.0.0.1:7070)", url));
  }
  rest.remove_prefix(https ? 8 : 7);
  if (rest.substr(0, rest.find('/')).find('@') != std::string_view::npos) {  // not echoed: it may hold a password
    return Status::InvalidArgument(
        "the server URL has a user name or password before '@': delayq takes a bearer token instead (--token, "
        "DELAYQ_AUTH_TOKEN, ClientOptions::auth_token); give http[s]://HOST:PORT");
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return Status::InvalidArgument(fmt::format("server URL \"{}\" must be http://HOST[:PORT] without a path", url));
  }
  std::string host(rest), port = "7070";
  if (auto colon = rest.rfind(':'); colon != std::string_view::npos && rest.back() != ']') {
    host = std::string(rest.substr(0, colon));
    port = std::string(rest.substr(colon + 1));
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
      return Status::InvalidArgument(fmt::format("server URL \"{}\" has a bad port", url));
    }
  }
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty()) return Status::InvalidArgument(fmt::format("server URL \"{}\" has no host", url));
  std::unique_ptr<Tls> tls;
  if (https) {
    auto made = MakeTls(tls_options, host);
    if (!made.ok()) return made.status();
    tls = std::move(*made);
  } else if (tls_options.any()) {
    std::vector<std::string> given;
    if (!tls_options.ca_file.empty()) given.push_back("a CA file (--ca-file, DELAYQ_CA_FILE)");
    if (!tls_options.cert_file.empty()) given.push_back("a client certificate (--client-cert, DELAYQ_CLIENT_CERT)");
    if (!tls_options.key_file.empty()) given.push_back("a client key (--client-key, DELAYQ_CLIENT_KEY)");
    if (!tls_options.server_name.empty()) given.push_back("a server name (--server-name, DELAYQ_SERVER_NAME)");
    return Status::InvalidArgument(
        fmt::format("{} was given for \"{}\": TLS options need an https:// URL", fmt::join(given, " and "), url));
  }
  return std::unique_ptr<HttpConnectionPool>(
      new HttpConnectionPool(std::string(url), host, port, std::move(auth_token), timeout_ms, std::move(tls)));
}

HttpConnectionPool::HttpConnectionPool(std::string url, std::string host, std::string port, std::string token,
                                       int64_t timeout_ms, std::unique_ptr<Tls> tls)
    : url_(std::move(url)),
      host_(std::move(host)),
      port_(std::move(port)),
      token_(std::move(token)),
      timeout_ms_(timeout_ms),
      tls_(std::move(tls)),
      watch_(std::make_unique<DeadlineWatch>()) {}

HttpConnectionPool::~HttpConnectionPool() = default;

Result<std::unique_ptr<HttpConnectionPool::Connection>> HttpConnectionPool::Connect(int64_t timeout_ms) {
  auto c = std::make_unique<Connection>();
  beast::error_code ec;
  tcp::resolver resolver(c->ioc);
  auto endpoints = resolver.resolve(host_, port_, ec);
  if (ec) {
    return Status::Unavailable(fmt::format("cannot reach delayq at {}: {}", url_, ec.message()));
  }
  net::connect(c->socket, endpoints, ec);
  if (ec) {
    return Status::Unavailable(
        fmt::format("cannot reach delayq at {}: {}{}", url_, ec.message(),
                    ec == net::error::connection_refused ? " (is `delayq serve` running there?)" : ""));
  }
  c->socket.set_option(tcp::no_delay(true), ec);
  if (tls_) {
    // The server's certificate must chain to a trusted CA and name the host of the URL (a DNS
    // name by SNI and subjectAltName, or an IP address).
    c->tls = std::make_unique<net::ssl::stream<tcp::socket&>>(c->socket, tls_->context);
    const std::string& name = tls_->server_name;
    beast::error_code bad_address;
    net::ip::make_address(name, bad_address);
    if (bad_address && !SSL_set_tlsext_host_name(c->tls->native_handle(), name.c_str())) {
      return Status::Internal("OpenSSL refused the server name for SNI");
    }
    c->tls->set_verify_mode(net::ssl::verify_peer);
    c->tls->set_verify_callback(net::ssl::host_name_verification(name));
    const uint64_t watched = watch_->Arm(c->socket.native_handle(), timeout_ms);
    c->tls->handshake(net::ssl::stream_base::client, ec);
    if (watch_->Disarm(watched)) {
      return Status::Unavailable(
          fmt::format("the TLS handshake with delayq at {} did not finish within {} ms", url_, timeout_ms));
    }
    if (ec) {
      const std::string hint = CertificateHint(ec.message());
      if (!hint.empty()) {
        return Status::Unavailable(
            fmt::format("the TLS handshake with delayq at {} failed: {}{}", url_, ec.message(), hint));
      }
      return Status::Unavailable(
          fmt::format("the TLS handshake with delayq at {} failed: {} (is it serving https with a certificate for {}, "
                      "signed by a CA this client trusts? give one with --ca-file / DELAYQ_CA_FILE)",
                      url_, ec.message(), tls_->server_name));
    }
  }
  return c;
}

namespace {
// Writes the whole request on a connection (an EINTR from a signal goes on where it stopped).
template <class Connection>
beast::error_code WriteWhole(Connection& c, bhttp::request<bhttp::string_body>& req) {
  beast::error_code ec;
  bhttp::request_serializer<bhttp::string_body> serializer{req};
  do {
    ec = {};
    c.OnStream([&](auto& stream) { bhttp::write(stream, serializer, ec); });
  } while (ec == net::error::interrupted);
  return ec;
}
}  // namespace

Result<HttpResult> HttpConnectionPool::Request(std::string_view method, std::string_view target, std::string_view body,
                                               int64_t timeout_ms, RequestCancel* cancel) {
  if (timeout_ms <= 0) timeout_ms = timeout_ms_;
  bhttp::request<bhttp::string_body> req;
  req.method(bhttp::string_to_verb(beast::string_view(method.data(), method.size())));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(bhttp::field::host, host_ + ":" + port_);
  req.set(bhttp::field::user_agent, "delayq-client");
  if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
  // The server refuses a POST, PUT or PATCH without a JSON content type, body or not.
  if (method != "GET" && method != "HEAD" && method != "DELETE")
    req.set(bhttp::field::content_type, "application/json");
  req.keep_alive(true);
  req.body() = std::string(body);
  req.prepare_payload();

  // A pooled connection that the server closed while it sat idle is dropped before use (a
  // peek sees its end). One that fails once the request is sent is in doubt: the server may
  // have died after acting on it (kill -9 after an enqueue was stored), so only a GET, which
  // changes nothing, is sent again; anything else answers kUnavailable and the caller decides
  // (found by delayq-check: an enqueue retried this way stored its job twice).
  const bool safe_to_repeat = method == "GET" || method == "HEAD";
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<Connection> c;
    bool reused = false;
    while (!cancel) {
      std::unique_lock lock(mu_);
      if (idle_.empty()) break;
      c = std::move(idle_.back());
      idle_.pop_back();
      lock.unlock();
      if (c->StillOpen()) {
        reused = true;
        break;
      }
      c.reset();
    }
    if (!c) {
      auto fresh = Connect(timeout_ms);
      if (!fresh.ok()) return fresh.status();
      c = std::move(*fresh);
    }
    if (cancel && !cancel->Attach(c->socket.native_handle())) {
      return Status::Unavailable(fmt::format("the request to delayq at {} was cancelled", url_));
    }
    // A signal that arrives while the socket blocks (EINTR: sockets with a timeout are never
    // restarted, whatever SA_RESTART says) interrupts the call; the serializer and the parser
    // keep their place, so the write or read simply goes on. Giving up instead would lose an
    // answer the server already gave, e.g. for an enqueue that is stored.
    const uint64_t watched = watch_->Arm(c->socket.native_handle(), timeout_ms);
    beast::error_code ec = WriteWhole(*c, req);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(256 << 20);
    size_t read = 0;
    if (!ec) {
      do {
        ec = {};
        read += c->OnStream([&](auto& stream) { return bhttp::read(stream, c->buffer, parser, ec); });
      } while (ec == net::error::interrupted && !parser.is_done());
    }
    if (cancel) cancel->Detach();  // before the socket can be closed
    if (watch_->Disarm(watched)) {
      return Status::Unavailable(fmt::format("delayq at {} did not answer within {} ms", url_, timeout_ms));
    }
    if (ec) {
      if (reused && safe_to_repeat && read == 0 && attempt == 0 &&
          (ec == bhttp::error::end_of_stream || ec == net::error::connection_reset || ec == net::error::broken_pipe ||
           ec == net::error::eof)) {
        continue;
      }
      return Status::Unavailable(
          fmt::format("lost the connection to delayq at {}: {}{}", url_, ec.message(), CertificateHint(ec.message())));
    }
    auto& res = parser.get();
    HttpResult out{static_cast<int>(res.result_int()), std::move(res.body())};
    if (res.keep_alive() && !cancel) {
      std::lock_guard lock(mu_);
      if (idle_.size() < 64) idle_.push_back(std::move(c));
    }
    return out;
  }
  return Status::Unavailable(fmt::format("lost the connection to delayq at {}", url_));
}

Status HttpConnectionPool::Stream(std::string_view target, std::string_view body, int64_t idle_timeout_ms,
                                  const std::function<bool(std::string_view)>& on_body, HttpResult* refused,
                                  RequestCancel* cancel) {
  bhttp::request<bhttp::string_body> req{bhttp::verb::post, beast::string_view(target.data(), target.size()), 11};
  req.set(bhttp::field::host, host_ + ":" + port_);
  req.set(bhttp::field::user_agent, "delayq-client");
  if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
  req.set(bhttp::field::content_type, "application/json");
  req.body() = std::string(body);
  req.prepare_payload();
  auto fresh = Connect(timeout_ms_);
  if (!fresh.ok()) return fresh.status();
  auto c = std::move(*fresh);
  if (cancel && !cancel->Attach(c->socket.native_handle())) return Status::Ok();  // cancelled: ended
  struct Detach {
    RequestCancel* cancel;
    ~Detach() {
      if (cancel) cancel->Detach();
    }
  } detach{cancel};
  uint64_t watched = watch_->Arm(c->socket.native_handle(), timeout_ms_);
  beast::error_code ec = WriteWhole(*c, req);
  bhttp::response_parser<bhttp::string_body> parser;
  // A refusal's body is read whole, so it is bounded; a stream's pieces go to on_body as they
  // come, and Beast counts every chunk against the limit: a stream never ends on it (once
  // its status says 2xx, below, the limit is lifted).
  parser.body_limit(16 << 20);
  bool streaming = false;
  bool stopped = false;
  auto take_piece = [&](std::uint64_t, beast::string_view piece, beast::error_code& e) -> std::size_t {
    if (!stopped && !on_body(std::string_view(piece.data(), piece.size()))) {
      stopped = true;
      e = net::error::operation_aborted;  // ends the read: the caller is done
    }
    return piece.size();
  };
  parser.on_chunk_body(take_piece);  // Beast keeps a reference: it lives as long as the parser
  while (!ec && !stopped) {
    if (parser.is_header_done() && parser.get().result_int() / 100 != 2) {
      // A refusal (a whole answer): read to its end.
      if (!parser.is_done()) c->OnStream([&](auto& stream) { bhttp::read(stream, c->buffer, parser, ec); });
      watch_->Disarm(watched);
      refused->status = static_cast<int>(parser.get().result_int());
      refused->body = std::move(parser.get().body());
      return Status::Ok();
    }
    if (parser.is_done()) break;
    if (parser.is_header_done() && !streaming) {
      // A stream comes in chunks, each handed to on_body. Any other 2xx answer would be read
      // into the parser's body, unbounded once the limit is lifted: refused instead.
      if (!parser.chunked()) {
        watch_->Disarm(watched);
        return Status::Unavailable(
            fmt::format("delayq at {} answered the stream without chunked encoding; a stream is a chunked answer "
                        "(is a proxy buffering it?)",
                        url_));
      }
      parser.body_limit(boost::none);
      streaming = true;
    }
    c->OnStream([&](auto& stream) { bhttp::read_some(stream, c->buffer, parser, ec); });
    if (ec == net::error::interrupted) ec = {};
    if (watch_->Disarm(watched)) {
      return Status::Unavailable(fmt::format("the stream from delayq at {} was silent for {} ms", url_,
                                             parser.is_header_done() ? idle_timeout_ms : timeout_ms_));
    }
    watched = watch_->Arm(c->socket.native_handle(), parser.is_header_done() ? idle_timeout_ms : timeout_ms_);
  }
  watch_->Disarm(watched);
  if (stopped || parser.is_done()) return Status::Ok();
  if (cancel && cancel->cancelled()) return Status::Ok();
  return Status::Unavailable(fmt::format("lost the stream from delayq at {}: {}", url_, ec.message()));
}

void RequestCancel::Cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // wakes the blocked read or write at once
}

bool RequestCancel::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

bool RequestCancel::Attach(int fd) {
  std::lock_guard lock(mu_);
  if (cancelled_) return false;
  fd_ = fd;
  return true;
}

void RequestCancel::Detach() {
  std::lock_guard lock(mu_);
  fd_ = -1;
}

std::string UrlEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace delayq::client
