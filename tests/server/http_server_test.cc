// The server's transport on its own (a handler instead of the Api), on what it writes: the
// answer's head is formatted by hand since issue 16, so its framing is checked byte for byte —
// status line, headers, Content-Length, HEAD, Connection: close, pipelined requests answered in
// order on one connection, a header with a line break in it dropped, not sent, and the refusal
// of a connection over a limit.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "server/http_server.h"

namespace delayq::server {
namespace {

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer({}); }
  void StartServer(HttpServerOptions options) {
    if (server_) TearDown();
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    server_ = std::make_unique<HttpServer>(
        [](http::HttpRequest request, http::Reply reply) -> std::function<void()> {
          http::HttpResponse r;
          r.status = request.target == "/missing" ? 404 : 200;
          r.content_type = "text/plain";
          r.body = "answer to " + request.target;
          r.headers.emplace_back("X-Ok", "1");
          r.headers.emplace_back("X-Split", "a\r\nSet-Cookie: evil=1");
          reply(std::move(r));
          return nullptr;
        },
        options);
    ASSERT_TRUE(server_->Start().ok());
    runner_ = std::thread([this] { server_->Run(false); });
  }
  void TearDown() override {
    server_->Stop();
    runner_.join();
    server_.reset();
  }

  int Connect() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server_->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }

  // Sends `bytes` on a fresh connection and reads until the server closes it or, with
  // `one_answer`, until one whole answer (head and Content-Length bytes of body) is in.
  std::string Exchange(const std::string& bytes, bool one_answer) {
    const int fd = Connect();
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    std::string got;
    auto whole = [&] {
      const size_t end = got.find("\r\n\r\n");
      const size_t len = got.find("Content-Length: ");
      return end != std::string::npos && len < end && got.size() >= end + 4 + std::stoul(got.substr(len + 16));
    };
    char buf[4096];
    while (!(one_answer && whole())) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return got;
  }

  std::unique_ptr<HttpServer> server_;
  std::thread runner_;
};

TEST_F(HttpServerTest, AnAnswerIsFramedByteForByteAndAHeaderWithALineBreakIsDropped) {
  const std::string got = Exchange("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(got,
            "HTTP/1.1 200 OK\r\nServer: delayq\r\nContent-Type: text/plain\r\nX-Ok: 1\r\n"
            "Content-Length: 12\r\n\r\nanswer to /a");
  EXPECT_EQ(got.find("Set-Cookie"), std::string::npos) << "a header value split the answer";
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrderAndCloseEndsTheConnection) {
  const std::string got = Exchange(
      "GET /one HTTP/1.1\r\nHost: x\r\n\r\nHEAD /two HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      false);
  const size_t one = got.find("answer to /one");
  const size_t head = got.find("Content-Length: 14\r\n\r\nHTTP/1.1 404 Not Found\r\n");
  const size_t missing = got.find("Connection: close\r\nContent-Length: 18\r\n\r\nanswer to /missing");
  EXPECT_NE(one, std::string::npos) << got;
  EXPECT_NE(head, std::string::npos) << "the HEAD answer: the GET's length and no body\n" << got;
  EXPECT_NE(missing, std::string::npos) << got;
  EXPECT_LT(one, head);
  EXPECT_LT(head, missing);
  EXPECT_EQ(got.find("answer to /two"), std::string::npos) << "a HEAD answer has no body";
}

// A connection over a limit is refused at accept with a whole answer in the same framing.
TEST_F(HttpServerTest, AConnectionOverTheLimitGetsAWholeRefusalAndIsClosed) {
  HttpServerOptions options;
  options.max_connections_per_address = 1;
  StartServer(options);
  const int first = Connect();
  ASSERT_EQ(Exchange("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", false)
                .rfind("HTTP/1.1 429 Too Many Requests\r\n"
                       "Server: delayq\r\n"
                       "Content-Type: application/json\r\n"
                       "Connection: close\r\nContent-Length: ",
                       0),
            0u);
  ::close(first);
}

}  // namespace
}  // namespace delayq::server
