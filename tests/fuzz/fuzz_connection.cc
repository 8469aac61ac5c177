// libFuzzer: raw bytes on a connection to the whole server (Boost.Beast transport, the Api, an
// embedded engine), in this process. The client sends the input and its end, then reads until
// the server closes. Any crash or sanitizer report, an answer that does not start with an HTTP
// status line, or a server that neither answers nor closes within 5 s is a bug.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "delayq/engine.h"
#include "http/api.h"
#include "server/http_server.h"

namespace {

struct InProcessServer {
  InProcessServer() {
    const std::string dir = std::filesystem::temp_directory_path() / ("delayq-fuzz-conn-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    // The engine is never closed (the server's threads use it to the end): its directory goes
    // when the process exits, as fuzz_request's does. Every CI run left one in /tmp before.
    static std::string cleanup = dir;
    std::atexit([] {
      std::error_code ignored;  // a throw here would abort the run
      std::filesystem::remove_all(cleanup, ignored);
    });
    delayq::EngineOptions o;
    o.path = dir;
    o.durability = delayq::Durability::kNone;
    auto e = delayq::Engine::Open(o);
    if (!e.ok()) std::abort();
    engine = std::move(*e);
    api = std::make_unique<delayq::http::Api>(*engine, delayq::http::ApiOptions{});
    delayq::server::HttpServerOptions options;
    options.port = 0;
    options.threads = 2;
    options.header_timeout_s = 2;
    options.max_body_bytes = 1 << 20;
    server = std::make_unique<delayq::server::HttpServer>(*api, options);
    if (!server->Start().ok()) std::abort();
    port = server->port();
    std::thread([this] { server->Run(false); }).detach();  // lives as long as the process
  }
  std::unique_ptr<delayq::Engine> engine;
  std::unique_ptr<delayq::http::Api> api;
  std::unique_ptr<delayq::server::HttpServer> server;
  int port = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static InProcessServer* server = new InProcessServer();  // never destroyed: threads use it
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server->port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) std::abort();
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  size_t sent = 0;
  while (sent < size) {
    ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early (a refused request)
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  char buf[65536];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == ECONNRESET) break;
      std::abort();  // no answer and no close within 5 s: a stuck connection
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!answer.empty() && answer.rfind("HTTP/1.1 ", 0) != 0) std::abort();
  return 0;
}
