// Boost.Beast (client side) lives in this file only.
#include <utility>  // before Asio with -std=c++20 on GCC 12 (see DEPENDENCIES.md)

#include "client/http_connection.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <cerrno>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace delayq::client {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

class HttpConnectionPool::Connection {
 public:
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;

  void SetTimeout(int64_t ms) {
    timeval tv{};
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  // Whether an idle connection is still open: no end, no reset and no stray bytes are waiting
  // (a peek that would block). Nothing has been sent on it yet, so dropping it is always safe.
  bool StillOpen() {
    if (buffer.size() > 0) return false;
    char byte;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
};

Result<std::unique_ptr<HttpConnectionPool>> HttpConnectionPool::Create(std::string_view url,
                                                                       std::string auth_token,
                                                                       int64_t timeout_ms) {
  std::string_view rest = url;
  if (rest.substr(0, 7) != "http://") {
    return Status::InvalidArgument(fmt::format(
        "server URL \"{}\" must start with http:// (for example http://127.0.0.1:7070)", url));
  }
  rest.remove_prefix(7);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return Status::InvalidArgument(
        fmt::format("server URL \"{}\" must be http://HOST[:PORT] without a path", url));
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
  return std::unique_ptr<HttpConnectionPool>(new HttpConnectionPool(
      std::string(url), host, port, std::move(auth_token), timeout_ms));
}

HttpConnectionPool::HttpConnectionPool(std::string url, std::string host, std::string port,
                                       std::string token, int64_t timeout_ms)
    : url_(std::move(url)), host_(std::move(host)), port_(std::move(port)),
      token_(std::move(token)), timeout_ms_(timeout_ms) {}

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
    return Status::Unavailable(fmt::format("cannot reach delayq at {}: {}{}", url_, ec.message(),
                                           ec == net::error::connection_refused
                                               ? " (is `delayq serve` running there?)"
                                               : ""));
  }
  c->socket.set_option(tcp::no_delay(true), ec);
  c->SetTimeout(timeout_ms);
  return c;
}

Result<HttpResult> HttpConnectionPool::Request(std::string_view method, std::string_view target,
                                               std::string_view body, int64_t timeout_ms,
                                               RequestCancel* cancel) {
  if (timeout_ms <= 0) timeout_ms = timeout_ms_;
  bhttp::request<bhttp::string_body> req;
  req.method(bhttp::string_to_verb(beast::string_view(method.data(), method.size())));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(bhttp::field::host, host_ + ":" + port_);
  req.set(bhttp::field::user_agent, "delayq-client");
  if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
  // The server refuses a POST, PUT or PATCH without a JSON content type, body or not.
  if (method != "GET" && method != "HEAD" && method != "DELETE") req.set(bhttp::field::content_type, "application/json");
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
    c->SetTimeout(timeout_ms);
    if (cancel && !cancel->Attach(c->socket.native_handle())) {
      return Status::Unavailable(fmt::format("the request to delayq at {} was cancelled", url_));
    }
    // A signal that arrives while the socket blocks (EINTR: sockets with a timeout are never
    // restarted, whatever SA_RESTART says) interrupts the call; the serializer and the parser
    // keep their place, so the write or read simply goes on. Giving up instead would lose an
    // answer the server already gave, e.g. for an enqueue that is stored.
    beast::error_code ec;
    bhttp::request_serializer<bhttp::string_body> serializer{req};
    do {
      ec = {};
      bhttp::write(c->socket, serializer, ec);
    } while (ec == net::error::interrupted);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(256 << 20);
    size_t read = 0;
    if (!ec) {
      do {
        ec = {};
        read += bhttp::read(c->socket, c->buffer, parser, ec);
      } while (ec == net::error::interrupted && !parser.is_done());
    }
    if (cancel) cancel->Detach();  // before the socket can be closed
    if (ec) {
      if (reused && safe_to_repeat && read == 0 && attempt == 0 &&
          (ec == bhttp::error::end_of_stream || ec == net::error::connection_reset ||
           ec == net::error::broken_pipe || ec == net::error::eof)) {
        continue;
      }
      if (ec == net::error::would_block || ec == net::error::try_again || ec == net::error::timed_out) {
        return Status::Unavailable(fmt::format("delayq at {} did not answer within {} ms", url_,
                                               timeout_ms));
      }
      return Status::Unavailable(
          fmt::format("lost the connection to delayq at {}: {}", url_, ec.message()));
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
