// The client's connection pool against a scripted HTTP server on 127.0.0.1: which requests it
// sends again when a connection fails, and which it must not (a repeated enqueue stores its job
// twice). delayq-check found the double enqueue when the server was killed mid-request.
#include "client/http_connection.h"
#include "delayq/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace delayq::client {
namespace {

// A listening socket on 127.0.0.1 with a port the system chose (in `port`).
int ListenOnLoopback(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// One request as the scripted server read it.
struct Seen {
  std::string method, target;
};

// Accepts connections one after another; for the n-th request overall, `script(n)` says what to
// do after reading it: answer and keep the connection, answer and close, or close unanswered.
enum class Then { kAnswer, kAnswerAndClose, kCloseUnanswered, kHoldUnanswered };

class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<Then(int)> script) : script_(std::move(script)) {
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return count_.load(); }
  // Blocks until the server has closed `n` connections.
  void WaitClosed(int n) {
    for (int c = closed_.load(); c < n; c = closed_.load()) closed_.wait(c);
  }

 private:
  void Serve() {
    for (;;) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string buf;
      bool open = true;
      while (open) {
        size_t end;
        while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
          char chunk[4096];
          const ssize_t n = ::read(c, chunk, sizeof chunk);
          if (n <= 0) {
            open = false;
            break;
          }
          buf.append(chunk, static_cast<size_t>(n));
        }
        if (!open) break;
        size_t length = 0;
        if (auto at = buf.find("Content-Length: "); at != std::string::npos && at < end) {
          length = std::stoul(buf.substr(at + 16));
        }
        while (buf.size() < end + 4 + length) {
          char chunk[4096];
          const ssize_t n = ::read(c, chunk, sizeof chunk);
          if (n <= 0) break;
          buf.append(chunk, static_cast<size_t>(n));
        }
        buf.erase(0, end + 4 + length);
        const Then then = script_(count_++);
        if (then == Then::kCloseUnanswered) break;
        if (then == Then::kHoldUnanswered) {  // never answers: holds the connection until the client goes
          char chunk[4096];
          while (::read(c, chunk, sizeof chunk) > 0) {
          }
          break;
        }
        const std::string answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        if (::write(c, answer.data(), answer.size()) < 0) break;
        if (then == Then::kAnswerAndClose) break;
      }
      ::close(c);
      closed_.fetch_add(1);
      closed_.notify_all();
    }
  }

  std::function<Then(int)> script_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> count_{0}, closed_{0};
  std::thread thread_;
};

// A waiting reserve whose answer never comes is given up after the client's timeout plus its
// wait (found by the history checker: the client waited a fixed 30 s more, whatever timeout it
// was given, so a server that dropped an answer hung the checker instead of failing it).
TEST(HttpConnectionPool, AReserveNeverAnsweredEndsAfterTheTimeoutPlusItsWait) {
  ScriptedServer server([](int) { return Then::kHoldUnanswered; });
  auto client = Client::Connect(server.url(), {.timeout_ms = 300});
  ASSERT_TRUE(client.ok());
  ReserveRequest r;
  r.wait_ms = 200;
  auto got = (*client)->Reserve("q", r);
  ASSERT_EQ(got.code(), Code::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("did not answer within 500 ms"), std::string::npos) << got.status().message();
}

TEST(HttpConnectionPool, AWriteWhoseConnectionFailsAfterItWasSentIsNotSentAgain) {
  // The second request is read and the connection closes unanswered, as when the server dies
  // after storing an enqueue.
  ScriptedServer server([](int n) { return n == 1 ? Then::kCloseUnanswered : Then::kAnswer; });
  auto pool = HttpConnectionPool::Create(server.url(), "", 5000);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE((*pool)->Request("POST", "/v1/queues/q/jobs", R"({"payload":1})").ok());
  auto second = (*pool)->Request("POST", "/v1/queues/q/jobs", R"({"payload":2})");
  EXPECT_EQ(second.code(), Code::kUnavailable) << "the enqueue was sent again";
  EXPECT_EQ(server.requests(), 2);
}

TEST(HttpConnectionPool, AReadWhoseConnectionFailsIsSentOnceMore) {
  ScriptedServer server([](int n) { return n == 1 ? Then::kCloseUnanswered : Then::kAnswer; });
  auto pool = HttpConnectionPool::Create(server.url(), "", 5000);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE((*pool)->Request("GET", "/v1/queues", "").ok());
  auto second = (*pool)->Request("GET", "/v1/queues", "");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(server.requests(), 3);
}

TEST(HttpConnectionPool, AConnectionTheServerClosedWhileIdleIsNotUsed) {
  ScriptedServer server([](int) { return Then::kAnswerAndClose; });
  auto pool = HttpConnectionPool::Create(server.url(), "", 5000);
  ASSERT_TRUE(pool.ok());
  ASSERT_TRUE((*pool)->Request("POST", "/v1/queues/q/jobs", "{}").ok());
  // The server closed the first connection after answering; the write goes on a fresh one.
  server.WaitClosed(1);
  auto second = (*pool)->Request("POST", "/v1/queues/q/jobs", "{}");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(server.requests(), 2);
}

// Answers one stream request with `head`, then writes `piece` again and again until the client
// closes the connection or `most` bytes went out: a server that never stops sending.
class EndlessStreamServer {
 public:
  EndlessStreamServer(std::string head, std::string piece, size_t most)
      : head_(std::move(head)), piece_(std::move(piece)), most_(most) {
    fd_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~EndlessStreamServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  size_t sent() const { return sent_.load(); }

 private:
  void Serve() {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    std::string request;
    char chunk[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::read(c, chunk, sizeof chunk);
      if (n <= 0) break;
      request.append(chunk, static_cast<size_t>(n));
    }
    bool ok = ::write(c, head_.data(), head_.size()) == static_cast<ssize_t>(head_.size());
    while (ok && sent_.load() < most_) {
      ok = ::send(c, piece_.data(), piece_.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(piece_.size());
      if (ok) sent_ += piece_.size();
    }
    ::close(c);
  }

  std::string head_, piece_;
  size_t most_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<size_t> sent_{0};
  std::thread thread_;
};

// A stream is a chunked answer. One that is not would be read into the client's memory until
// the server closes it (the body limit is lifted for streams): refused at its head.
TEST(ClientStream, AnAnswerWithoutChunksIsRefusedNotBuffered) {
  EndlessStreamServer server("HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n",
                             std::string(64 << 10, 'x'), size_t{256} << 20);
  auto client = Client::Connect(server.url(), {.timeout_ms = 5000});
  ASSERT_TRUE(client.ok());
  int lines = 0;
  const Status s = (*client)->Stream("q", {}, [&](const Delivery*) { return ++lines < 10; });
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("without chunked encoding"), std::string::npos) << s.message();
  EXPECT_EQ(lines, 0);
}

// A line that never ends: the client keeps at most the longest line a job can make, then ends
// the stream (before, a 16 MiB limit on the whole answer stopped it by accident, and broke every
// long stream with it).
TEST(ClientStream, ALineThatNeverEndsEndsTheStream) {
  std::string piece = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";  // chunks of 64 KiB, no newline
  EndlessStreamServer server(
      "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n", piece,
      size_t{512} << 20);
  auto client = Client::Connect(server.url(), {.timeout_ms = 5000});
  ASSERT_TRUE(client.ok());
  const Status s = (*client)->Stream("q", {}, [](const Delivery*) { return true; });
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("is longer than"), std::string::npos) << s.message();
  EXPECT_LT(server.sent(), size_t{200} << 20);  // it stopped reading near the limit (~86 MiB), not at 512 MiB
}

}  // namespace
}  // namespace delayq::client
