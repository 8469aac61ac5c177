// Boost.Beast lives in this file only (it takes long to compile).
#include <utility>  // before Asio with -std=c++20 on GCC 12 (see DEPENDENCIES.md)

#include "server/http_server.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "wire/error.h"
#include "wire/json_writer.h"

namespace delayq::server {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

constexpr uint64_t kAdmitAboveBytes = 64 * 1024;  // see HttpServerOptions::admit
using tcp = net::ip::tcp;

namespace {

// What a client's side of its socket shows, looked at without taking a byte. A client that shut
// its side (its FIN, seen as POLLRDHUP even behind unread bytes: over TLS a polite client's
// close_notify comes first) or reset it is gone; unread bytes with its side open are a client
// still talking (a pipelined request, or a close_notify whose FIN is on its way).
enum class Peer { kQuiet, kTalking, kGone };

Peer PeerNow(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return Peer::kGone;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Peer::kQuiet : Peer::kGone;
  pollfd p{fd, POLLRDHUP, 0};
  const bool shut = ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  return shut ? Peer::kGone : Peer::kTalking;
}

bool HeaderSafe(std::string_view text) { return text.find_first_of("\r\n") == std::string_view::npos; }

// W3C Trace Context's headers: one traceparent (two lines of it are none: W3C reads neither), and
// tracestate, which may come in several lines that read as one joined with commas.
template <class Request>
void ReadTraceContext(const Request& req, http::HttpRequest& out) {
  if (req.count("traceparent") == 1) out.traceparent = std::string(req.find("traceparent")->value());
  for (auto [it, end] = req.equal_range("tracestate"); it != end; ++it) {
    if (!out.tracestate.empty()) out.tracestate += ',';
    out.tracestate.append(it->value().data(), it->value().size());
  }
}

// The head of every answer the server writes (written by hand: Beast's response object and
// serializer were 8 % of the server's CPU for a single-job request, docs/performance.md).
// Header names and values come from delayq's code, never from a request; one holding a line
// break would split the answer, so it is dropped (and said). `length` is the body's (for HEAD,
// the GET's) length; none for a streamed answer.
std::string AnswerHead(int status, std::string_view content_type,
                       const std::vector<std::pair<std::string, std::string>>& headers, bool keep_alive,
                       std::optional<size_t> length) {
  std::string head;
  auto out = std::back_inserter(head);
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  fmt::format_to(out, "HTTP/1.1 {} {}\r\nServer: delayq\r\n", status, std::string_view(reason.data(), reason.size()));
  auto put = [&](std::string_view name, std::string_view value) {
    if (!HeaderSafe(name) || !HeaderSafe(value)) {
      spdlog::error("dropping the answer header \"{}\": it holds a line break", name.substr(0, 100));
      return;
    }
    fmt::format_to(out, "{}: {}\r\n", name, value);
  };
  put("Content-Type", content_type);
  for (const auto& [name, value] : headers) put(name, value);
  if (!keep_alive) head += "Connection: close\r\n";
  if (length) {
    fmt::format_to(out, "Content-Length: {}\r\n\r\n", *length);
  } else {
    // A streamed answer: chunks until the last; a proxy (nginx) is asked not to hold them back.
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n\r\n";
  }
  return head;
}

}  // namespace

class HttpServer::Impl {
 public:
  class SessionBase;
  template <class Stream>
  class Session;

  Impl(Handler handler, HttpServerOptions options, std::atomic<int64_t>* connections, std::atomic<int64_t>* body_bytes)
      : handler_(std::move(handler)),
        connections_(connections != nullptr ? connections : &own_connections_),
        body_bytes_(body_bytes != nullptr ? body_bytes : &own_body_bytes_),
        options_(std::move(options)),
        ioc_(options_.threads),
        // A strand: Stop closes the acceptor (posted to its executor) while an accept's handler
        // may be starting the next accept on another thread; TSan saw the two race.
        acceptor_(net::make_strand(ioc_)) {}

  // Handlers still queued when the loop stopped hold Sessions; destroying them (in ~io_context)
  // runs ~Session, which unregisters here: so the io_context goes before the members it uses
  // (it is declared after them).
  ~Impl() = default;

  Status Start() {
    if (!options_.tls_client_ca_file.empty() && options_.tls_cert_file.empty()) {
      return Status::InvalidArgument(
          "--tls-client-ca asks clients for a certificate over TLS: give --tls-cert and "
          "--tls-key too, or leave it out");
    }
    if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty()) {
      DELAYQ_RETURN_IF_ERROR(LoadTls());
    }
    beast::error_code ec;
    auto address = net::ip::make_address(options_.host, ec);
    if (ec) {
      return Status::InvalidArgument(
          fmt::format("listen address \"{}\" is not an IP address (use 127.0.0.1, 0.0.0.0 or ::1)", options_.host));
    }
    tcp::endpoint endpoint(address, options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Unavailable(fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    return Status::Ok();
  }

  uint16_t port() const { return port_; }

  // The certificate chain and key for TLS (OpenSSL through Asio): TLS 1.2 and later only.
  Status LoadTls() {
    if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
      return Status::InvalidArgument("give both --tls-cert and --tls-key (PEM files), or neither");
    }
    ssl_.emplace(net::ssl::context::tls_server);
    ssl_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                      net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1 |
                      net::ssl::context::single_dh_use);
    // An encrypted key would make OpenSSL ask for its pass phrase on the terminal: refuse it instead.
    ssl_->set_password_callback([](std::size_t, net::ssl::context::password_purpose) { return std::string(); });
    // Sessions a client resumes (curl, Node, browsers do) need an id context once client
    // certificates are checked: without one OpenSSL refuses every resumption with an internal
    // error alert (found: with --tls-client-ca, 199 of 200 parallel Node calls failed).
    static constexpr unsigned char kSessionContext[] = "delayq";
    SSL_CTX_set_session_id_context(ssl_->native_handle(), kSessionContext, sizeof(kSessionContext) - 1);
    beast::error_code ec;
    ssl_->use_certificate_chain_file(options_.tls_cert_file, ec);
    if (ec) {
      return Status::InvalidArgument(fmt::format("cannot use --tls-cert \"{}\": {} (a PEM certificate chain is needed)",
                                                 options_.tls_cert_file, ec.message()));
    }
    ssl_->use_private_key_file(options_.tls_key_file, net::ssl::context::pem, ec);
    // OpenSSL compares a key with the certificate only when both are of one type (an RSA key
    // beside an ECDSA certificate was taken): ask it to.
    if (!ec && SSL_CTX_check_private_key(ssl_->native_handle()) != 1) {
      ec = beast::error_code(static_cast<int>(ERR_get_error()), net::error::get_ssl_category());
    }
    if (ec) {
      return Status::InvalidArgument(
          fmt::format("cannot use --tls-key \"{}\": {} (an unencrypted PEM private key matching --tls-cert is needed)",
                      options_.tls_key_file, ec.message()));
    }
    if (!options_.tls_client_ca_file.empty()) {
      ssl_->load_verify_file(options_.tls_client_ca_file, ec);
      if (ec) {
        return Status::InvalidArgument(fmt::format(
            "cannot use --tls-client-ca \"{}\": {} (a PEM file of the CAs that sign client certificates is needed)",
            options_.tls_client_ca_file, ec.message()));
      }
      ssl_->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
    }
    return Status::Ok();
  }
  bool tls() const { return ssl_.has_value(); }

  void Run(bool handle_signals, std::function<void()> on_stop) {
    on_stop_ = std::move(on_stop);
    net::signal_set signals(ioc_);
    if (handle_signals) {
      signals.add(SIGTERM);
      signals.add(SIGINT);
      signals.async_wait([this](const beast::error_code& ec, int signal) {
        if (ec) return;
        spdlog::info("received {}: stopping (answering waiting reserves, finishing requests)",
                     signal == SIGTERM ? "SIGTERM" : "SIGINT");
        Stop();
      });
    }
    std::vector<std::thread> threads;
    for (int i = 1; i < options_.threads; ++i) threads.emplace_back([this] { ioc_.run(); });
    ioc_.run();
    for (auto& t : threads) t.join();
  }

  void Stop() {
    if (stopping_.exchange(true)) return;
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      if (on_stop_) on_stop_();  // closes the store: waiting reserves are answered now
      CloseIdle();
      // Requests still running get a few seconds; then the loop ends regardless.
      auto timer = std::make_shared<net::steady_timer>(ioc_, std::chrono::seconds(10));
      timer->async_wait([this, timer](const beast::error_code&) { ioc_.stop(); });
      {
        std::lock_guard lock(mu_);  // MaybeFinish runs on any of the loop's threads
        stop_timer_ = timer;
      }
      MaybeFinish();
    });
  }

  void Register(const std::shared_ptr<SessionBase>& s) {
    std::lock_guard lock(mu_);
    sessions_.insert(s.get());
  }
  void Unregister(SessionBase* s, const net::ip::address& peer) {
    {
      std::lock_guard lock(mu_);
      sessions_.erase(s);
      if (auto it = per_address_.find(peer); it != per_address_.end() && --it->second == 0) {
        per_address_.erase(it);
      }
    }
    if (stopping_ && !ioc_.stopped()) net::post(ioc_, [this] { MaybeFinish(); });
  }
  bool stopping() const { return stopping_; }
  // Takes `bytes` of the bodies' budget (max_body_memory); false when it would go over.
  bool TakeBodyBytes(size_t bytes) {
    int64_t held = body_bytes_->load();
    do {
      if (static_cast<size_t>(held) + bytes > options_.max_body_memory) return false;
    } while (!body_bytes_->compare_exchange_weak(held, held + static_cast<int64_t>(bytes)));
    return true;
  }
  void GiveBodyBytes(size_t bytes) { *body_bytes_ -= static_cast<int64_t>(bytes); }
  const Handler& handler() const { return handler_; }
  std::atomic<int64_t>& connections() { return *connections_; }
  const HttpServerOptions& options() const { return options_; }

 private:
  void Accept();
  void CloseIdle();
  // A whole HTTP answer refusing a connection at accept.
  static std::string Refusal(int status, Code code, std::string_view message);
  // Logs (at most once a second) a TLS connection closed at accept for a connection limit.
  void NoteTlsRefusal(const net::ip::address& peer, bool busy);
  std::atomic<int64_t> last_tls_refusal_log_ms_{-1'000'000};
  void MaybeFinish() {
    std::lock_guard lock(mu_);
    if (sessions_.empty() && stop_timer_) {
      stop_timer_->cancel();
      stop_timer_.reset();
      ioc_.stop();
    }
  }

  Handler handler_;
  std::atomic<int64_t> own_connections_{0}, own_body_bytes_{0};
  std::atomic<int64_t>* connections_;
  std::atomic<int64_t>* body_bytes_;  // see TakeBodyBytes
  HttpServerOptions options_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::function<void()> on_stop_;
  std::mutex mu_;
  std::set<SessionBase*> sessions_;
  std::map<net::ip::address, size_t> per_address_;  // open connections by client address
  std::optional<net::ssl::context> ssl_;            // set when serving TLS
  // Destroyed first (see ~Impl): the loop, then what runs on it.
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::shared_ptr<net::steady_timer> stop_timer_;  // guarded by mu_
};

// What the server keeps of a connection, whatever it is carried on.
class HttpServer::Impl::SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  virtual void Start() = 0;
  // Called (on any thread) when the server stops: closes the connection unless a request is
  // being handled, in which case it closes after answering.
  virtual void CloseIfIdle() = 0;
};

// One connection: plain TCP (beast::tcp_stream) or TLS over it (beast::ssl_stream).
template <class Stream>
class HttpServer::Impl::Session final : public SessionBase {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... Args>
  Session(Impl& server, net::ip::address peer, Args&&... stream_args)
      : server_(server), stream_(std::forward<Args>(stream_args)...), peer_(std::move(peer)) {}

  ~Session() override {
    ReleaseBody();
    --server_.connections();
    server_.Unregister(this, peer_);
  }

  void Start() override {
    ++server_.connections();
    net::dispatch(stream_.get_executor(), [self = Self()] {
      if constexpr (kTls) {
        // The handshake gets the header's deadline: a client that stalls in it is closed. Its
        // first bytes are read first: plain HTTP sent to this port gets a plain answer saying
        // so, not a closed connection.
        self->Tcp().expires_after(std::chrono::seconds(self->server_.options().header_timeout_s));
        self->Tcp().async_read_some(self->buffer_.prepare(4096), [self](beast::error_code ec, size_t n) {
          self->buffer_.commit(n);
          if (ec) return self->Close();
          if (LooksLikePlainHttp(self->buffer_.data())) return self->RefusePlainHttp();
          self->stream_.async_handshake(net::ssl::stream_base::server, self->buffer_.data(),
                                        [self](beast::error_code ec, size_t used) {
                                          self->buffer_.consume(used);
                                          if (ec) return self->Close();
                                          self->Read();
                                        });
        });
      } else {
        self->Read();
      }
    });
  }

  // A request line ("GET /", "POST /v1/...") where a TLS handshake should start.
  static bool LooksLikePlainHttp(net::const_buffer data) {
    const std::string_view head(static_cast<const char*>(data.data()), std::min<size_t>(data.size(), 8));
    for (std::string_view method : {"GET ", "POST ", "PUT ", "DELETE ", "PATCH ", "HEAD ", "OPTIONS "}) {
      if (head.substr(0, method.size()) == method) return true;
    }
    return false;
  }
  void RefusePlainHttp() {
    constexpr std::string_view kBody =
        "this port serves HTTPS only (delayq serve --tls-cert): use https:// and trust its certificate\n";
    auto text = std::make_shared<std::string>(fmt::format(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
        kBody.size(), kBody));
    net::async_write(Tcp(), net::buffer(*text), [self = Self(), text](beast::error_code, size_t) { self->Close(); });
  }

  void CloseIfIdle() override {
    net::post(stream_.get_executor(), [self = Self()] {
      if (self->sink_) return self->StopStream();
      if (!self->busy_) {
        beast::error_code ec;
        self->Tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
        self->Tcp().close();
      }
    });
  }

 private:
  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  // Between requests a connection may idle (idle_timeout_s); once a request's first byte is in,
  // its header has header_timeout_s, so a client trickling bytes cannot hold the slot.
  void Read() {
    parser_.emplace();
    parser_->body_limit(server_.options().max_body_bytes);
    parser_->header_limit(64 * 1024);
    if (buffer_.size() > 0) return ReadHeader();  // a pipelined request is already here
    Tcp().expires_after(std::chrono::seconds(server_.options().idle_timeout_s));
    stream_.async_read_some(buffer_.prepare(4096), [self = Self()](beast::error_code ec, size_t n) {
      self->buffer_.commit(n);
      if (ec) return self->Close();
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    Tcp().expires_after(std::chrono::seconds(server_.options().header_timeout_s));
    // The header first: what it says decides whether the body is read at all.
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = Self()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void ReleaseBody() {
    server_.GiveBodyBytes(body_bytes_);
    body_bytes_ = 0;
  }

  static bool Gone(beast::error_code ec) {
    return ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted || ec == beast::error::timeout ||
           ec == net::error::eof || ec == net::error::connection_reset;
  }

  void OnHeader(beast::error_code ec) {
    if (Gone(ec)) return Close();
    if (!ec) {
      // Request smuggling: a Transfer-Encoding that is not exactly "chunked" (e.g. "chunked,
      // identity") was read as no body, and the bytes after it ran as a second request. Refuse
      // it, and Transfer-Encoding beside Content-Length, and close (RFC 9112 6.1, 6.3).
      const auto& req = parser_->get();
      auto te = req.find(bhttp::field::transfer_encoding);
      if (te != req.end()) {
        std::string value(te->value());
        for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
        if (value != "chunked") {
          return Fail(400, "invalid_argument",
                      fmt::format("Transfer-Encoding \"{}\" is not supported; send \"chunked\" or a "
                                  "Content-Length",
                                  std::string(te->value()).substr(0, 100)));
        }
        if (req.find(bhttp::field::content_length) != req.end()) {
          return Fail(400, "invalid_argument", "send either Transfer-Encoding or Content-Length, not both");
        }
      }
      if (parser_->is_done()) return OnRead(ec);
      // A large body is read only if the request may go on (auth, Host, Origin, content type).
      const auto length = parser_->content_length();
      if (server_.options().admit && (!length || *length > kAdmitAboveBytes)) {
        http::HttpRequest head;
        head.method = std::string(req.method_string());
        head.target = std::string(req.target());
        head.authorization = std::string(req[bhttp::field::authorization]);
        head.content_type = std::string(req[bhttp::field::content_type]);
        head.host = std::string(req[bhttp::field::host]);
        head.origin = std::string(req[bhttp::field::origin]);
        if (auto refused = server_.options().admit(head)) {
          keep_alive_ = false;
          head_ = false;
          busy_ = true;
          return Write(std::move(*refused));
        }
      }
      // The bytes this body may hold count against the budget of all bodies until it is answered.
      const size_t limit = server_.options().max_body_bytes;
      const size_t take = length ? static_cast<size_t>(std::min<uint64_t>(*length, limit)) : limit;
      if (!server_.TakeBodyBytes(take)) {
        return Fail(503, "unavailable",
                    fmt::format("the server holds the most request bodies it may at once (--max-body-memory "
                                "{} bytes); retry shortly",
                                server_.options().max_body_memory));
      }
      body_bytes_ = take;
      Tcp().expires_after(std::chrono::seconds(server_.options().header_timeout_s) +
                          std::chrono::seconds(take / (64 * 1024)));
      return bhttp::async_read(stream_, buffer_, *parser_,
                               [self = Self()](beast::error_code ec, size_t) { self->OnRead(ec); });
    }
    OnRead(ec);
  }

  void OnRead(beast::error_code ec) {
    if (Gone(ec)) return Close();
    if (ec == bhttp::error::body_limit) {
      return Fail(
          413, "too_large",
          fmt::format("the request body is over {} bytes; send smaller batches", server_.options().max_body_bytes));
    }
    if (ec == bhttp::error::header_limit) {
      return Fail(431, "too_large", "the request headers are over 64 KiB");
    }
    if (ec) return Fail(400, "invalid_argument", "malformed HTTP request: " + ec.message());

    auto& req = parser_->get();
    keep_alive_ = req.keep_alive() && !server_.stopping();
    http10_ = req.version() < 11;
    head_ = req.method() == bhttp::verb::head;
    http::HttpRequest request;
    request.method = std::string(head_ ? "GET" : req.method_string());
    request.target = std::string(req.target());
    request.authorization = std::string(req[bhttp::field::authorization]);
    request.host = std::string(req[bhttp::field::host]);
    request.origin = std::string(req[bhttp::field::origin]);
    request.content_type = std::string(req[bhttp::field::content_type]);
    ReadTraceContext(req, request);
    request.body = std::move(req.body());
    // Asked before jobs are handed over, also behind a pipelined request already read (a hostile
    // try found a reserve that gave a job to a client gone since, its watch on a later look). The
    // socket stays open until the reply is written, which is as long as the Api may ask.
    request.peer_closed = [fd = Tcp().socket().native_handle()] { return PeerNow(fd) == Peer::kGone; };
    busy_ = true;
    answered_ = false;
    ++request_number_;
    auto self = Self();
    // dispatch: answered on this strand (the usual case) it writes at once, without waking
    // another thread; answered later from a store thread it is queued onto the strand.
    cancel_ = server_.handler()(std::move(request), [self](http::HttpResponse response) {
      net::dispatch(self->stream_.get_executor(),
                    [self, response = std::move(response)]() mutable { self->Write(std::move(response)); });
    });
    if (cancel_ && !answered_) WatchForHangUp(request_number_);
  }

  // While a reserve or a wait for an outcome waits, notice a client that hangs up, and abandon
  // the wait (answered empty; the write then fails and closes). A watch serves one request (its
  // number): one left from an earlier wait on this connection stops at its next look, rather than
  // watching the next wait beside that wait's own (a hostile try piled up 1 000).
  void WatchForHangUp(uint64_t request) {
    Tcp().socket().async_wait(tcp::socket::wait_read, [self = Self(), request](beast::error_code ec) {
      self->LookForHangUp(ec, request, kFirstLookMs);
    });
  }

  static constexpr int64_t kFirstLookMs = 10, kLastLookMs = 1'000;

  void LookForHangUp(beast::error_code ec, uint64_t request, int64_t next_look_ms) {
    if (request != request_number_ || answered_ || !cancel_) return;
    switch (ec ? Peer::kGone : PeerNow(Tcp().socket().native_handle())) {
      case Peer::kQuiet:
        // Woken with nothing to read: Asio's reactor can complete the wait for a readiness it saw
        // before the request's last bytes were read. Watch on (CI saw a wait that stopped
        // watching here outlive its client).
        return WatchForHangUp(request);
      case Peer::kGone: {
        auto cancel = std::move(cancel_);
        return cancel();
      }
      case Peer::kTalking: {
        // Bytes wait unread, so the socket stays readable and a wait would wake at once: look
        // again on a timer (10 ms, doubling to 1 s). Over TLS the FIN after a close_notify comes
        // within the first looks; a pipelining client costs a look a second.
        auto timer =
            std::make_shared<net::steady_timer>(stream_.get_executor(), std::chrono::milliseconds(next_look_ms));
        timer->async_wait([self = Self(), timer, request, next_look_ms](beast::error_code) {
          self->LookForHangUp({}, request, std::min(next_look_ms * 2, kLastLookMs));
        });
        return;
      }
    }
  }

  // The head (AnswerHead) and the moved body go out in one gather write on plain TCP: the body is
  // never copied. Over TLS the head and the body are written one after the other: Beast 1.74's
  // ssl_stream (a flat_stream over Asio's) completes a gather write once its first buffer is
  // written, so every answer over ~16 KB lost its body (the dashboard, /openapi.json, big
  // reserves) while the connection was then closed.
  struct Answer {
    std::string head, body;
    std::function<void()> unwritten;  // HttpResponse::unwritten
  };

  void Write(http::HttpResponse r) {
    if (r.stream) return WriteStream(std::move(r));
    answered_ = true;
    cancel_ = nullptr;
    ReleaseBody();
    const bool keep_alive = keep_alive_ && !server_.stopping();
    auto out = std::make_shared<Answer>();
    out->head = AnswerHead(r.status, r.content_type, r.headers, keep_alive, r.body.size());
    if (!head_) out->body = std::move(r.body);  // a HEAD answer has the GET's length and no body
    out->unwritten = std::move(r.unwritten);
    // 30 s, and a second more per MiB: a big answer to a slow reader is not cut off.
    Tcp().expires_after(std::chrono::seconds(30) + std::chrono::seconds(out->body.size() >> 20));
    auto written = [self = Self(), out, keep_alive](beast::error_code ec, size_t) {
      if (ec && out->unwritten) out->unwritten();  // the client never got it whole
      self->busy_ = false;
      // Stopping: CloseIfIdle may have passed this connection over while the write was still
      // finishing (the client can hold the answer before this runs), so close it here.
      if (ec || !keep_alive || self->server_.stopping()) return self->Close();
      self->Read();
    };
    if constexpr (kTls) {
      net::async_write(stream_, net::buffer(out->head),
                       [self = Self(), out, written = std::move(written)](beast::error_code ec, size_t n) mutable {
                         if (ec || out->body.empty()) return written(ec, n);
                         net::async_write(self->stream_, net::buffer(out->body), std::move(written));
                       });
    } else {
      const std::array<net::const_buffer, 2> buffers{net::buffer(out->head), net::buffer(out->body)};
      net::async_write(stream_, buffers, std::move(written));
    }
  }

  // A streamed answer (HttpResponse::stream): the head, then the chunks the source sends, all
  // that are queued going out in one write, then the last chunk, and the connection closes.
  // Meanwhile the socket is watched: a client that hangs up (or sends anything: a stream's
  // connection carries nothing else) ends the stream, as does a write that fails or stalls for
  // 30 s. Then the source hears Gone (push_stream.h gives its deliveries back).
  class Sink final : public http::StreamSink, public std::enable_shared_from_this<Sink> {
   public:
    explicit Sink(const std::shared_ptr<Session>& s) : session_(s), executor_(s->stream_.get_executor()) {}
    bool Send(std::string chunk) override {
      auto s = session_.lock();
      if (over || !s) return false;
      pending += chunk.size();
      net::post(executor_, [s, chunk = std::move(chunk)]() mutable { s->QueueChunk(std::move(chunk)); });
      return true;
    }
    size_t Pending() const override { return pending.load(); }
    uint64_t Written() const override { return written.load(); }
    void End() override {
      if (auto s = session_.lock()) net::post(executor_, [s] { s->EndStream(); });
    }
    void Abort() override {
      if (auto s = session_.lock()) net::post(executor_, [s] { s->AbortStream(); });
    }
    void After(int64_t ms, std::function<void()> fn) override {
      auto timer = std::make_shared<net::steady_timer>(executor_, std::chrono::milliseconds(ms));
      timer->async_wait(
          [timer, fn = std::move(fn), weak = std::weak_ptr<Sink>(this->weak_from_this())](const beast::error_code& ec) {
            auto self = weak.lock();
            if (!ec && self && !self->over) fn();
          });
    }
    void Post(std::function<void()> fn) override {
      net::post(executor_, [fn = std::move(fn), weak = std::weak_ptr<Sink>(this->weak_from_this())] {
        auto self = weak.lock();
        if (self && !self->over) fn();
      });
    }
    std::atomic<bool> over{false};
    std::atomic<size_t> pending{0};    // bytes sent, not yet written
    std::atomic<uint64_t> written{0};  // bytes sent and written

   private:
    std::weak_ptr<Session> session_;
    net::any_io_executor executor_;
  };

  void WriteStream(http::HttpResponse r) {
    // Refused before the stream starts (nothing was reserved for it yet): an HTTP/1.0 client
    // cannot read chunks, and bytes after the request (a pipelined request) are a client that
    // is still talking on the connection a stream holds alone.
    if (http10_) {
      return Fail(400, "invalid_argument", "a stream needs HTTP/1.1 (its answer is chunked); this request is HTTP/1.0");
    }
    if (buffer_.size() > 0) {
      return Fail(400, "invalid_argument",
                  "bytes came after the stream request on its connection: a stream holds its connection alone "
                  "(open it on a connection of its own, and send nothing after it)");
    }
    answered_ = true;
    cancel_ = nullptr;
    ReleaseBody();
    keep_alive_ = false;
    source_ = std::move(r.stream);
    auto head = std::make_shared<std::string>(AnswerHead(r.status, r.content_type, r.headers, false, std::nullopt));
    Tcp().expires_after(std::chrono::seconds(30));
    net::async_write(stream_, net::buffer(*head), [self = Self(), head](beast::error_code ec, size_t) {
      if (ec) return self->StreamOver();
      self->Tcp().expires_never();
      // Lines the kernel holds are out of the stream's sight (a consumer that stopped reading
      // uses up their jobs' attempts): hold few. 256 KiB still fills a fast consumer's pipe.
      beast::error_code ignored;
      self->Tcp().socket().set_option(net::socket_base::send_buffer_size(kStreamSendBuffer), ignored);
      self->sink_ = std::make_shared<Sink>(self);
      self->WatchStream();
      if (self->source_) self->source_->Start(self->sink_);
    });
  }

  void WatchStream() {
    Tcp().socket().async_wait(tcp::socket::wait_read, [self = Self()](beast::error_code ec) {
      if (self->sink_->over) return;
      // Woken with nothing to read watches on; bytes or a hang-up end the stream.
      if (!ec && PeerNow(self->Tcp().socket().native_handle()) == Peer::kQuiet) return self->WatchStream();
      self->StreamOver();
    });
  }

  void QueueChunk(std::string data) {
    if (sink_->over || ending_) return;
    fmt::format_to(std::back_inserter(queued_), "{:x}\r\n", data.size());
    queued_data_ += data.size();
    queued_ += data;
    queued_ += "\r\n";
    if (!writing_) WriteQueued();
  }

  void WriteQueued() {
    if (queued_.empty() && !ending_) {
      writing_ = false;
      return;
    }
    const bool last = queued_.empty();  // and ending: the last chunk
    if (last) queued_ = "0\r\n\r\n";
    writing_ = true;
    in_write_.swap(queued_);
    queued_.clear();
    in_write_data_ = std::exchange(queued_data_, 0);
    Tcp().expires_after(std::chrono::seconds(30) + std::chrono::seconds(in_write_.size() >> 20));
    net::async_write(stream_, net::buffer(in_write_), [self = Self(), last](beast::error_code ec, size_t) {
      if (ec) return self->StreamOver();
      self->Tcp().expires_never();
      self->sink_->pending -= self->in_write_data_;
      self->sink_->written += self->in_write_data_;
      if (!last) return self->WriteQueued();
      self->sink_->over = true;  // ended by the source: no Gone
      self->source_.reset();
      self->Close();
    });
  }

  void EndStream() {
    if (sink_->over || ending_) return;
    ending_ = true;
    if (!writing_) WriteQueued();
  }

  // The server stops (its streams were stopped first: Api::StopStreams): the stream ends cleanly,
  // its deliveries left leased.
  void StopStream() {
    if (sink_->over) return;
    source_.reset();
    EndStream();
  }

  // The source ended the stream and gave its deliveries back (a consumer that does not read):
  // the lines still queued must not reach it.
  void AbortStream() {
    if (sink_->over) return;
    queued_.clear();
    sink_->over = true;
    source_.reset();
    Close();
  }

  void StreamOver() {
    if (sink_) {
      if (sink_->over) return;
      sink_->over = true;
    }
    if (auto source = std::move(source_)) source->Gone();
    Close();
  }

  void Fail(int status, std::string_view code, std::string message) {
    keep_alive_ = false;
    busy_ = true;
    http::HttpResponse r;
    r.status = status;
    wire::JsonWriter w;
    w.BeginObject().Key("error").BeginObject().Key("code").String(code);
    w.Key("message").String(message).EndObject().EndObject();
    r.body = w.Take();
    Write(std::move(r));
  }

  void Close() {
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
    Tcp().close();
  }

  Impl& server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  net::ip::address peer_;
  size_t body_bytes_ = 0;  // of the body budget, held until the answer
  std::function<void()> cancel_;
  // A streamed answer's: its source, the transport's side, and the chunks queued and being written.
  std::shared_ptr<http::StreamSource> source_;
  std::shared_ptr<Sink> sink_;
  std::string queued_, in_write_;
  size_t queued_data_ = 0, in_write_data_ = 0;  // the lines' bytes in them, without the framing
  bool writing_ = false;
  bool ending_ = false;
  bool keep_alive_ = true;
  bool http10_ = false;  // the request being answered is HTTP/1.0
  static constexpr int kStreamSendBuffer = 256 << 10;
  bool head_ = false;
  bool busy_ = false;
  bool answered_ = false;
  uint64_t request_number_ = 0;  // of the request being answered, for its hang-up watch
};

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (stopping_ || ec == net::error::operation_aborted) return;
      spdlog::warn("accept failed: {}", ec.message());
    } else {
      socket.set_option(tcp::no_delay(true), ec);
      const auto peer = socket.remote_endpoint(ec).address();
      // Over a limit: a short answer and close, so the client knows why. Written without
      // waiting (non-blocking); a client that does not read it just sees the close.
      const std::string* refusal = nullptr;
      bool busy = false;
      {
        std::lock_guard lock(mu_);
        size_t& from_peer = per_address_[peer];
        if (sessions_.size() >= options_.max_connections || stopping_) {
          static const std::string kBusy =
              Refusal(503, Code::kUnavailable, "delayq is at its connection limit (--max-connections); retry later");
          refusal = &kBusy;
          busy = true;
        } else if (options_.max_connections_per_address > 0 && from_peer >= options_.max_connections_per_address) {
          static const std::string kTooMany =
              Refusal(429, Code::kResourceExhausted,
                      "this address has the most connections one client may open (--max-connections-per-address); "
                      "reuse connections (keep-alive) or close some");
          refusal = &kTooMany;
        }
        if (refusal == nullptr) ++from_peer;
        else if (from_peer == 0) per_address_.erase(peer);
      }
      if (refusal != nullptr) {
        // Over TLS nothing can be said before a handshake, and plain bytes read as a protocol
        // error: the connection is closed (docs/security.md), and the refusal logged.
        if (!ssl_) {
          socket.non_blocking(true, ec);
          (void)::send(socket.native_handle(), refusal->data(), refusal->size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        } else {
          NoteTlsRefusal(peer, busy);
        }
        socket.close(ec);
      } else {
        std::shared_ptr<SessionBase> session;
        if (ssl_) {
          session =
              std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, peer, std::move(socket), *ssl_);
        } else {
          session = std::make_shared<Session<beast::tcp_stream>>(*this, peer, std::move(socket));
        }
        Register(session);
        session->Start();
      }
    }
    Accept();
  });
}

void HttpServer::Impl::NoteTlsRefusal(const net::ip::address& peer, bool busy) {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  int64_t last = last_tls_refusal_log_ms_.load();
  if (now_ms - last < 1000 || !last_tls_refusal_log_ms_.compare_exchange_strong(last, now_ms)) return;
  spdlog::warn(
      "closed a TLS connection from {} unanswered: {} (over TLS a refusal cannot be written before a "
      "handshake)",
      peer.to_string(), busy ? "delayq is at --max-connections" : "that address is at --max-connections-per-address");
}

std::string HttpServer::Impl::Refusal(int status, Code code, std::string_view message) {
  std::string body = wire::ErrorBody(code, message);
  return AnswerHead(status, "application/json", {}, false, body.size()) + body;
}

void HttpServer::Impl::CloseIdle() {
  std::vector<std::shared_ptr<SessionBase>> sessions;
  {
    std::lock_guard lock(mu_);
    for (SessionBase* s : sessions_) {
      if (auto p = s->weak_from_this().lock()) sessions.push_back(std::move(p));
    }
  }
  for (auto& s : sessions) s->CloseIfIdle();
}

bool SplitHostPort(const std::string& listen, std::string* host, uint16_t* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) return false;
  std::string p = listen.substr(colon + 1);
  if (p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5) return false;
  long v = std::stol(p);
  if (v > 65535) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (host->empty()) *host = "127.0.0.1";
  *port = static_cast<uint16_t>(v);
  return true;
}

HttpServer::HttpServer(Handler handler, HttpServerOptions options, std::atomic<int64_t>* connections,
                       std::atomic<int64_t>* body_bytes)
    : impl_(std::make_unique<Impl>(std::move(handler), std::move(options), connections, body_bytes)) {}
HttpServer::HttpServer(http::Api& api, HttpServerOptions options)
    : HttpServer([&api](http::HttpRequest request,
                        http::Reply reply) { return api.Handle(std::move(request), std::move(reply)); },
                 [&] {
                   options.admit = [&api](const http::HttpRequest& head) { return api.Admit(head); };
                   return std::move(options);
                 }(),
                 &api.metrics().connections, &api.metrics().body_bytes) {}
HttpServer::~HttpServer() = default;
Status HttpServer::Start() { return impl_->Start(); }
uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::Run(bool handle_signals, std::function<void()> on_stop) {
  impl_->Run(handle_signals, std::move(on_stop));
}
void HttpServer::Stop() { impl_->Stop(); }

}  // namespace delayq::server
