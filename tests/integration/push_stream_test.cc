// Push delivery (POST /v1/queues/{q}/stream, SPEC §11.4) against the real `delayq serve`: the
// stream read raw (chunked ndjson over TCP, or TLS through OpenSSL), the rest through
// delayq::Client. The window (max_in_flight) and what makes room (ack, lease end), a consumer
// that goes away, heartbeats, hostile requests, flow control and pause, mixed traffic with many
// streams, TLS with big lines, SIGTERM, --max-waiting, and the same on Redis and PostgreSQL.
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "delayq/client.h"
#include "integration/server_fixture.h"
#include "store/postgres/pg_fixture.h"
#include "store/redis/redis_fixture.h"
#include "support/raw_http.h"
#include "support/test_certs.h"
#include "wire/stream.h"

namespace delayq::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A server over TLS (durability interval) and a client that trusts its certificate.
struct TlsServer {
  TestCerts certs;
  ServerProcess server{
      {"--durability", "interval", "--tls-cert", certs.cert("server"), "--tls-key", certs.key("server")}};
  std::unique_ptr<Client> client = server.NewClient([this] {
    ClientOptions o;
    o.tls_ca_file = certs.ca();
    return o;
  }());
};

// One stream read raw: its status, then its lines as they come.
class StreamReader {
 public:
  StreamReader(int port, const std::string& queue, const std::string& body, const std::string& ca = "") {
    fd_ = ConnectFrom(port);
    if (fd_ < 0) throw std::runtime_error("cannot connect");
    if (!ca.empty()) StartTls(ca);
    const std::string request = "POST /v1/queues/" + queue +
                                "/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    Write(request);
    ReadHead();
  }
  ~StreamReader() { Close(); }
  StreamReader(const StreamReader&) = delete;

  int status() const { return status_; }
  const std::string& head() const { return head_; }
  // A refusal's body (a whole answer with Content-Length).
  std::string body() {
    while (raw_.size() < content_length_ && Fill(milliseconds(5000))) {
    }
    return raw_;
  }
  bool ended() const { return ended_; }

  // The next line, or nothing when the stream ended or closed, or `timeout` passed first.
  std::optional<std::string> NextLine(milliseconds timeout = milliseconds(10'000)) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      Decode();
      if (auto nl = data_.find('\n'); nl != std::string::npos) {
        std::string line = data_.substr(0, nl);
        data_.erase(0, nl + 1);
        return line;
      }
      if (ended_ || closed_) return std::nullopt;
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      if (!Fill(left)) {
        if (Clock::now() >= deadline) return std::nullopt;
      }
    }
  }
  // The next line that is a delivery (heartbeats are skipped), within `timeout`.
  std::optional<Delivery> NextDelivery(milliseconds timeout = milliseconds(10'000)) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto line = NextLine(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
      if (!line) return std::nullopt;
      auto parsed = wire::ParseStreamLine(*line);
      if (!parsed.ok()) throw std::runtime_error("not a stream line: " + *line);
      if (auto* d = std::get_if<Delivery>(&*parsed)) return *d;
    }
    return std::nullopt;
  }
  void Close() {
    if (ssl_) {
      SSL_free(ssl_);
      ssl_ = nullptr;
    }
    if (ctx_) {
      SSL_CTX_free(ctx_);
      ctx_ = nullptr;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  void StartTls(const std::string& ca) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    if (SSL_connect(ssl_) != 1) throw std::runtime_error("TLS handshake failed");
  }
  void Write(const std::string& bytes) {
    if (ssl_) {
      SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
    } else {
      ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }
  }
  // Reads what is there (waiting up to `timeout`); false when nothing came.
  bool Fill(milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[65536];
    ssize_t n;
    if (ssl_) {
      n = SSL_read(ssl_, buf, sizeof(buf));
      if (n <= 0) {
        const int e = SSL_get_error(ssl_, static_cast<int>(n));
        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno != EAGAIN && errno != EWOULDBLOCK)) {
          closed_ = true;
        }
        ERR_clear_error();
        return false;
      }
    } else {
      n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) closed_ = true;
      if (n <= 0) return false;
    }
    raw_.append(buf, static_cast<size_t>(n));
    return true;
  }
  void ReadHead() {
    while (raw_.find("\r\n\r\n") == std::string::npos) {
      if (!Fill(milliseconds(10'000))) throw std::runtime_error("no answer head: " + raw_);
    }
    const size_t end = raw_.find("\r\n\r\n");
    head_ = raw_.substr(0, end + 4);
    raw_.erase(0, end + 4);
    status_ = StatusOf(head_);
    chunked_ = head_.find("Transfer-Encoding: chunked") != std::string::npos;
    if (auto at = head_.find("Content-Length: "); at != std::string::npos) {
      content_length_ = std::stoul(head_.substr(at + 16));
    }
  }
  // Moves whole chunks from raw_ to data_.
  void Decode() {
    while (chunked_ && !ended_) {
      const size_t eol = raw_.find("\r\n");
      if (eol == std::string::npos) return;
      const size_t size = std::stoul(raw_.substr(0, eol), nullptr, 16);
      if (raw_.size() < eol + 2 + size + 2) return;
      if (size == 0) {
        ended_ = true;
        return;
      }
      data_ += raw_.substr(eol + 2, size);
      raw_.erase(0, eol + 2 + size + 2);
    }
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string raw_, data_, head_;
  int status_ = 0;
  size_t content_length_ = 0;
  bool chunked_ = false, ended_ = false, closed_ = false;
};

ServerProcess& SharedServer() {
  static ServerProcess server({"--durability", "interval", "--stream-heartbeat-ms", "300"});
  return server;
}

std::string NewQueue(const std::string& what) {
  static std::atomic<int> n{0};
  return "stream-" + what + "-" + std::to_string(++n);
}

void EnqueueN(Client& client, const std::string& queue, int n, int64_t delay_ms = 0) {
  for (int i = 0; i < n; ++i) {
    EnqueueRequest r{.payload = "{\"n\":" + std::to_string(i) + "}"};
    r.when.delay_ms = delay_ms;
    auto e = client.Enqueue(queue, r);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
  }
}

// Waits (on the server's answers, not on time) until the queue's stats satisfy `done`.
template <typename Done>
QueueStats StatsWhen(Client& client, const std::string& queue, Done done) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  QueueStats last;
  while (Clock::now() < deadline) {
    auto s = client.Stats(queue);
    if (s.ok()) {
      last = *s;
      if (done(last)) return last;
    }
    std::this_thread::yield();
  }
  return last;
}

// The window on any store: at most max_in_flight lines, an ack makes room for the next, and a
// consumer that leaves gives its deliveries back without using an attempt.
void TheWindowHolds(int port, Client& client, const std::string& queue) {
  EnqueueN(client, queue, 3);
  StreamReader stream(port, queue, R"({"max_in_flight": 2})");
  ASSERT_EQ(stream.status(), 200) << stream.head();
  EXPECT_NE(stream.head().find("Content-Type: application/x-ndjson"), std::string::npos) << stream.head();
  auto first = stream.NextDelivery();
  auto second = stream.NextDelivery();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->attempt, 1);
  // A third is ready, but the window is full: heartbeats only, for longer than a heartbeat.
  EXPECT_FALSE(stream.NextDelivery(milliseconds(700)));
  ASSERT_TRUE(client.Ack(queue, first->receipt).ok());
  auto third = stream.NextDelivery();
  ASSERT_TRUE(third);
  std::set<std::string> ids = {first->id, second->id, third->id};
  EXPECT_EQ(ids.size(), 3u);
  stream.Close();
  // Gone: the two unacknowledged deliveries are ready again, with no attempt used.
  auto s = StatsWhen(client, queue, [](const QueueStats& st) { return st.reserved == 0; });
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.ready, 2);
  auto job = client.Get(queue, JobRef::ById(second->id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->attempt, 0);
}

TEST(PushStream, AnAckMakesRoomInTheWindowAndAConsumerThatLeavesGivesItsJobsBack) {
  auto client = SharedServer().NewClient();
  TheWindowHolds(SharedServer().port(), *client, NewQueue("window"));
}

TEST(PushStream, JobsComeAsTheyComeDueNotBefore) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("due");
  StreamReader stream(SharedServer().port(), queue, "");  // an empty body: every default
  ASSERT_EQ(stream.status(), 200);
  // The server counts the delay from when it takes the enqueue, which is after `sent`: the
  // job is not due before sent + 400 ms (less a millisecond for the due time's rounding). The
  // time after the enqueue answers is no bound: a slow round trip (a sanitizer's) would count.
  const auto sent = Clock::now();
  EnqueueN(*client, queue, 1, 400);
  auto d = stream.NextDelivery();
  ASSERT_TRUE(d);
  EXPECT_GE(Clock::now(), sent + milliseconds(400) - milliseconds(1));
  EXPECT_TRUE(client->Ack(queue, d->receipt).ok());
}

TEST(PushStream, ALeaseThatRunsOutMakesRoom) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("lease");
  EnqueueN(*client, queue, 2);
  StreamReader stream(SharedServer().port(), queue, R"({"max_in_flight": 1, "lease_ms": 1000})");
  auto first = stream.NextDelivery();
  ASSERT_TRUE(first);
  // Not acked: at the lease's end the stream has room, and the next delivery comes (the other
  // job, or this one again).
  auto next = stream.NextDelivery(milliseconds(5000));
  ASSERT_TRUE(next);
  EXPECT_NE(next->receipt, first->receipt);
}

TEST(PushStream, AnIdleStreamSendsHeartbeats) {
  const std::string queue = NewQueue("idle");
  StreamReader stream(SharedServer().port(), queue, R"({"max_in_flight": 5})");
  for (int i = 0; i < 2; ++i) {
    auto line = stream.NextLine(milliseconds(3000));
    ASSERT_TRUE(line);
    auto parsed = wire::ParseStreamLine(*line);
    ASSERT_TRUE(parsed.ok()) << *line;
    ASSERT_TRUE(std::holds_alternative<int64_t>(*parsed)) << *line;
    EXPECT_GT(std::get<int64_t>(*parsed), 1'700'000'000'000);
  }
}

TEST(PushStream, HostileRequestsAreRefusedBeforeAnyJobIsTaken) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("hostile");
  EnqueueN(*client, queue, 3);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"max_in_flight": 0})", "max_in_flight is 0"},
      {R"({"max_in_flight": -1})", "max_in_flight is -1"},
      {R"({"max_in_flight": 1001})", "between 1 and 1000"},
      {R"({"max_in_flight": 9223372036854775807})", "max_in_flight"},
      {R"({"max_in_flight": -9223372036854775808})", "max_in_flight"},
      {R"({"max_in_flight": 18446744073709551616})", "64 bits"},
      {R"({"max_in_flight": 1.5})", "max_in_flight"},
      {R"({"max_in_flight": "10"})", "max_in_flight"},
      {R"({"max_in_flight": null})", "max_in_flight"},
      {R"({"lease_ms": 0})", "lease_ms"},
      {R"({"lease_ms": 9223372036854775807})", "lease_ms"},
      {R"({"max_bytes": 0})", "max_bytes"},
      {R"({"max_inflight": 5})", "unknown field"},
      {R"([1, 2])", "JSON object"},
      {R"({"max_in_flight": 5)", "JSON"},
      {"\"" + std::string(300'000, 'x') + "\"", "JSON object"},
  };
  for (const auto& [body, says] : cases) {
    StreamReader stream(SharedServer().port(), queue, body);
    EXPECT_EQ(stream.status(), 400) << body.substr(0, 80);
    EXPECT_NE(stream.body().find(says), std::string::npos) << body.substr(0, 80) << " -> " << stream.body();
  }
  StreamReader bad_name(SharedServer().port(), "bad%20name", "{}");
  EXPECT_EQ(bad_name.status(), 400);
  EXPECT_NE(bad_name.body().find("queue name"), std::string::npos) << bad_name.body();
  auto s = client->Stats(queue);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->reserved, 0);
  EXPECT_EQ(s->ready, 3);
  EXPECT_EQ(s->counters.delivered, 0);
}

TEST(PushStream, FlowControlAndPauseHoldAStreamBackAsTheyHoldAReserve) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("flow");
  QueueConfig config;
  config.max_reserved = 1;
  ASSERT_TRUE(client->SetConfig(queue, config).ok());
  EnqueueN(*client, queue, 3);
  StreamReader stream(SharedServer().port(), queue, R"({"max_in_flight": 10})");
  auto first = stream.NextDelivery();
  ASSERT_TRUE(first);
  EXPECT_FALSE(stream.NextDelivery(milliseconds(700)));  // max_reserved 1: no second
  ASSERT_TRUE(client->Pause(queue).ok());
  ASSERT_TRUE(client->Ack(queue, first->receipt).ok());
  EXPECT_FALSE(stream.NextDelivery(milliseconds(700)));  // paused
  ASSERT_TRUE(client->Resume(queue).ok());
  auto second = stream.NextDelivery();
  ASSERT_TRUE(second);
  EXPECT_NE(second->id, first->id);
}

// Four streams and a long-polling consumer share a queue while a producer hands jobs in and an
// administrator pauses and resumes it; some deliveries are nacked, some streams leave midway.
// Every job is acked exactly once, and nothing stays reserved.
TEST(PushStream, StreamsAndReservesUnderMixedTrafficAckEveryJobOnce) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("mixed");
  QueueConfig config;
  config.backoff.base_ms = 0;
  config.backoff.jitter = 0;
  config.max_attempts = 100;
  ASSERT_TRUE(client->SetConfig(queue, config).ok());
  constexpr int kJobs = 600;
  std::mutex mu;
  std::map<std::string, int> acked;  // id -> successful acks
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  auto record = [&](const std::string& id) {
    std::lock_guard lock(mu);
    ++acked[id];
    ++done;
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < 4; ++c) {
    threads.emplace_back([&, c] {
      auto own = SharedServer().NewClient();
      int seen = 0;
      while (!stop && done < kJobs) {
        StreamReader stream(SharedServer().port(), queue, R"({"max_in_flight": 8})");
        if (stream.status() != 200) continue;
        while (!stop && done < kJobs) {
          auto d = stream.NextDelivery(milliseconds(500));
          if (!d) break;
          ++seen;
          if (seen % 7 == c) {
            (void)own->Nack(queue, NackRequest{.receipt = d->receipt});
          } else if (own->Ack(queue, d->receipt).ok()) {
            record(d->id);
          }
          if (seen % 50 == 0) break;  // leaves, with what it holds unacknowledged
        }
      }
    });
  }
  threads.emplace_back([&] {
    auto own = SharedServer().NewClient();
    while (!stop && done < kJobs) {
      auto got = own->Reserve(queue, ReserveRequest{.max = 5, .wait_ms = 200});
      if (!got.ok()) continue;
      for (const auto& d : *got) {
        if (own->Ack(queue, d.receipt).ok()) record(d.id);
      }
    }
  });
  threads.emplace_back([&] {
    auto own = SharedServer().NewClient();
    for (int i = 0; i < 20 && !stop; ++i) {
      (void)own->Pause(queue);
      (void)own->Resume(queue);
    }
  });
  EnqueueN(*client, queue, kJobs);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (done < kJobs && Clock::now() < deadline) std::this_thread::yield();
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_TRUE(client->Resume(queue).ok());
  EXPECT_EQ(done.load(), kJobs);
  EXPECT_EQ(acked.size(), static_cast<size_t>(kJobs));
  for (const auto& [id, n] : acked) EXPECT_EQ(n, 1) << id;
  auto s = StatsWhen(*client, queue, [](const QueueStats& st) { return st.reserved == 0; });
  EXPECT_EQ(s.reserved + s.ready + s.scheduled, 0);
}

TEST(PushStream, OverTlsLinesOfManyKilobytesArriveWhole) {
  TlsServer tls;
  auto& [certs, server, client] = tls;
  const std::string queue = "tls-stream";
  const std::string big = "\"" + std::string(200'000, 'y') + "\"";
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client->Enqueue(queue, EnqueueRequest{.payload = big}).ok());
  StreamReader stream(server.port(), queue, R"({"max_in_flight": 4})", certs.ca());
  ASSERT_EQ(stream.status(), 200) << stream.head();
  for (int i = 0; i < 4; ++i) {
    auto d = stream.NextDelivery();
    ASSERT_TRUE(d) << "delivery " << i;
    EXPECT_EQ(d->payload, big);
    EXPECT_TRUE(client->Ack(queue, d->receipt).ok());
  }
}

// A stream is one answer that never ends: the client reading it must not hold its length to a
// body limit. The C++ client's parser counted every chunk against 16 MiB, and a stream of 100-byte
// jobs (~270 bytes a line) broke after ~60 000 of them, its deliveries given back and delivered
// again (their acks then refused as stale).
TEST(PushStream, ThroughTheClientAStreamLongerThanSixteenMebibytesGoesOn) {
  ServerProcess server({"--durability", "none"});
  auto client = server.NewClient();
  auto acker = server.NewClient();
  const std::string queue = "long-stream";
  const std::string big = "\"" + std::string(900'000, 'z') + "\"";
  constexpr int kJobs = 24;  // 24 lines of ~900 kB: ~21 MB on one stream
  for (int i = 0; i < kJobs; ++i) ASSERT_TRUE(client->Enqueue(queue, EnqueueRequest{.payload = big}).ok());
  int received = 0;
  StreamOptions options;
  options.max_in_flight = 2;
  const Status s = client->Stream(queue, options, [&](const Delivery* d) {
    if (!d) return true;  // a heartbeat
    EXPECT_EQ(d->payload, big);
    EXPECT_TRUE(acker->Ack(queue, d->receipt).ok()) << received;
    return ++received < kJobs;
  });
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(received, kJobs);
  const auto st = client->Stats(queue);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->ready + st->reserved + st->scheduled, 0);
}

TEST(PushStream, SigtermEndsAStreamWithItsLastChunk) {
  ServerProcess server({"--durability", "interval"});
  StreamReader stream(server.port(), "sigterm-stream", R"({"max_in_flight": 3})");
  ASSERT_EQ(stream.status(), 200);
  EXPECT_EQ(server.Terminate(), 0);
  while (stream.NextLine(milliseconds(5000))) {
  }
  EXPECT_TRUE(stream.ended());
}

TEST(PushStream, MaxWaitingBoundsStreams) {
  ServerProcess server({"--durability", "interval", "--max-waiting", "2"});
  StreamReader a(server.port(), "bounded", "{}"), b(server.port(), "bounded", "{}");
  ASSERT_EQ(a.status(), 200);
  ASSERT_EQ(b.status(), 200);
  StreamReader c(server.port(), "bounded", "{}");
  EXPECT_EQ(c.status(), 429);
  EXPECT_NE(c.body().find("--max-waiting"), std::string::npos) << c.body();
  a.Close();
  // The place comes back once the server has seen the first one go.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (status != 200 && Clock::now() < deadline) {
    StreamReader d(server.port(), "bounded", "{}");
    status = d.status();
  }
  EXPECT_EQ(status, 200);
}

// Found in review: a reserve that answered inside ReserveAsync (jobs ready) left a second,
// waiting reserve whose handle the stream lost, so a stream whose consumer left lived on until
// that wait ended (and took, then gave back, a job enqueued meanwhile).
TEST(PushStream, AStreamWhoseConsumerLeftEndsAtOnceEvenAfterAReserveThatAnsweredAtOnce) {
  ServerProcess server({"--durability", "interval", "--stream-heartbeat-ms", "15000"});
  auto client = server.NewClient();
  const std::string queue = "left";
  EnqueueN(*client, queue, 3);
  {
    StreamReader stream(server.port(), queue, R"({"max_in_flight": 10})");
    for (int i = 0; i < 3; ++i) {
      auto d = stream.NextDelivery();
      ASSERT_TRUE(d);
      ASSERT_TRUE(client->Ack(queue, d->receipt).ok());
    }
  }
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  auto streams = [&] {
    auto m = client->Metrics();
    return m.ok() && m->find("\ndelayq_streams 0\n") != std::string::npos;
  };
  while (!streams() && Clock::now() < deadline) std::this_thread::yield();
  EXPECT_TRUE(streams()) << "the stream outlived its consumer";
  EnqueueN(*client, queue, 1);
  auto s = client->Stats(queue);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->counters.delivered, 3);
  EXPECT_EQ(s->ready, 1);
}

// Found in review: a consumer that never read its stream had its jobs delivered again and again
// as their leases ran out (each time an attempt), into dead letters, while the unread lines grew
// in the server's memory. Now a lease that runs out on a line never written ends the stream and
// gives its jobs back.
TEST(PushStream, AConsumerThatDoesNotReadDoesNotUseUpTheAttemptsOfItsJobs) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("unread");
  QueueConfig config;
  config.max_attempts = 3;
  config.max_payload = 4 << 20;
  ASSERT_TRUE(client->SetConfig(queue, config).ok());
  const std::string big = "\"" + std::string(3 << 20, 'z') + "\"";  // more than the connection buffers
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->Enqueue(queue, EnqueueRequest{.payload = big}).ok());
  {
    StreamReader stream(SharedServer().port(), queue, R"({"lease_ms": 1000})");
    ASSERT_EQ(stream.status(), 200);
    // Not read: the leases run out (1 s) with lines still unwritten.
    auto s = StatsWhen(*client, queue, [](const QueueStats& st) { return st.reserved == 0 && st.ready == 5; });
    EXPECT_EQ(s.dead, 0);
    EXPECT_EQ(s.ready, 5);
  }
  auto page = client->ListJobs(queue, ListRequest{.state = JobState::kReady});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  // Given back at half its lease (on a slow machine, at its end: one attempt used, never more).
  for (const auto& j : page->jobs) EXPECT_LE(j.attempt, 1) << j.id;
}

// Found by a hostile try: small jobs that all fit in the connection's buffers, a window of 1000
// and a lease of 1 s, never read. The lines in the buffers used an attempt at their lease's end,
// the window opened again, and the next reserve (up to max_bytes, 16 MiB) used the second: 1 000
// of 1 000 jobs dead in 2 s. Now a reserve takes at most what 1 MiB of waiting lines leaves room
// for, the kernel holds few lines (a 256 KiB send buffer), and the stream ends at half a lease
// of a line waiting in the server, while every lease holds: no job is dead.
TEST(PushStream, AConsumerThatNeverReadsSmallJobsSendsNoneDead) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("unread-small");
  QueueConfig config;
  config.max_attempts = 2;
  ASSERT_TRUE(client->SetConfig(queue, config).ok());
  std::vector<EnqueueRequest> batch(1000);
  for (auto& r : batch) r.payload = "\"" + std::string(2000, 's') + "\"";
  ASSERT_TRUE(client->EnqueueBatch(queue, batch).ok());
  {
    // A lease of 2 s: the stream must end before it runs out (at 1 s), also under a sanitizer.
    StreamReader stream(SharedServer().port(), queue, R"({"max_in_flight": 1000, "lease_ms": 2000})");
    ASSERT_EQ(stream.status(), 200);
    auto s = StatsWhen(*client, queue, [](const QueueStats& st) { return st.reserved == 0 && st.ready == 1000; });
    EXPECT_EQ(s.dead, 0);
    EXPECT_EQ(s.ready, 1000);
  }
  auto s = client->Stats(queue);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->dead, 0);
}

// Found by a hostile try: a queue deleted with its jobs (force) left its stream's window full of
// deliveries that were gone, and jobs enqueued anew waited for those leases to end.
TEST(PushStream, AQueueDeletedWithItsJobsGivesItsStreamsRoomAtOnce) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("deleted");
  EnqueueN(*client, queue, 2);
  StreamReader stream(SharedServer().port(), queue, R"({"max_in_flight": 2, "lease_ms": 600000})");
  ASSERT_EQ(stream.status(), 200);
  ASSERT_TRUE(stream.NextDelivery());
  ASSERT_TRUE(stream.NextDelivery());
  auto deleted = client->DeleteQueue(queue, true);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EnqueueN(*client, queue, 1);
  auto d = stream.NextDelivery(milliseconds(10'000));
  ASSERT_TRUE(d) << "the new job never came (the window was still full of the deleted jobs)";
  EXPECT_TRUE(client->Ack(queue, d->receipt).ok());
}

// A stream is refused before anything is reserved when the client cannot read it (HTTP/1.0: no
// chunks) or is still talking on its connection (a request pipelined after it).
TEST(PushStream, AnHttp10OrPipelinedStreamIsRefusedBeforeAnyJobIsTaken) {
  auto client = SharedServer().NewClient();
  const std::string queue = NewQueue("refused-stream");
  EnqueueN(*client, queue, 1);
  const std::string stream = "POST /v1/queues/" + queue +
                             "/stream HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             "Content-Length: 2\r\n\r\n{}";
  std::string answer = RawExchange(SharedServer().port(), stream);
  EXPECT_NE(answer.find(" 400 "), std::string::npos) << answer;
  EXPECT_NE(answer.find("HTTP/1.1"), std::string::npos) << answer;
  EXPECT_NE(answer.find("needs HTTP/1.1"), std::string::npos) << answer;
  std::string pipelined = stream;
  pipelined.replace(pipelined.find("HTTP/1.0"), 8, "HTTP/1.1");
  pipelined += "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  answer = RawExchange(SharedServer().port(), pipelined, 1 << 20, true);
  EXPECT_NE(answer.find(" 400 "), std::string::npos) << answer;
  EXPECT_NE(answer.find("connection of its own"), std::string::npos) << answer;
  auto s = client->Stats(queue);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ready, 1);
  EXPECT_EQ(s->counters.delivered, 0u);
}

// Found in review: SIGTERM with a stream open on PostgreSQL crashed the server (the closing
// store answered the stream's reserve at once, again and again, each answer reserving anew
// within the last: 35 000 frames). On every store the stream now ends with its last chunk, and
// its deliveries stay leased to the consumer, who may still ack them.
void SigtermEndsTheStreamAndLeavesItsDeliveriesLeased(const std::vector<std::string>& store_args) {
  std::vector<std::string> args = {"--durability", "interval"};
  args.insert(args.end(), store_args.begin(), store_args.end());
  ServerProcess server(args);
  auto client = server.NewClient();
  const std::string queue = "sigterm-leased";
  EnqueueN(*client, queue, 2);
  StreamReader stream(server.port(), queue, R"({"max_in_flight": 5})");
  auto first = stream.NextDelivery();
  auto second = stream.NextDelivery();
  ASSERT_TRUE(first && second);
  StreamReader idle(server.port(), "sigterm-idle", "{}");  // a stream with nothing to deliver
  EXPECT_EQ(server.Terminate(), 0) << server.log();
  while (stream.NextLine(milliseconds(5000))) {
  }
  EXPECT_TRUE(stream.ended());
  while (idle.NextLine(milliseconds(5000))) {
  }
  EXPECT_TRUE(idle.ended());
  server.Restart();
  auto again = server.NewClient();
  auto s = again->Stats(queue);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->reserved, 2);
  EXPECT_TRUE(again->Ack(queue, first->receipt).ok());
}

TEST(PushStream, SigtermLeavesDeliveriesLeasedOnTheEmbeddedStore) {
  SigtermEndsTheStreamAndLeavesItsDeliveriesLeased({});
}

TEST(PushStream, SigtermLeavesDeliveriesLeasedOnRedis) {
  RedisServer redis;
  SigtermEndsTheStreamAndLeavesItsDeliveriesLeased({"--store", redis.url()});
}

TEST(PushStream, SigtermLeavesDeliveriesLeasedOnPostgres) {
  PostgresServer pg;
  SigtermEndsTheStreamAndLeavesItsDeliveriesLeased({"--store", pg.NewDatabase()});
}

// Every store: the window and the give-back on Redis and PostgreSQL.
TEST(PushStream, TheWindowHoldsOnRedis) {
  RedisServer redis;
  ServerProcess server({"--durability", "interval", "--store", redis.url()});
  auto client = server.NewClient();
  TheWindowHolds(server.port(), *client, "redis-window");
}

// EVALSHA calls Redis has run so far (INFO commandstats): every script a store call runs.
int64_t RedisScriptCalls(int port) {
  const RunResult r = RunProcess({"redis-cli", "-p", std::to_string(port), "INFO", "commandstats"});
  const std::string field = "cmdstat_evalsha:calls=";
  const auto at = r.out.find(field);
  return at == std::string::npos ? 0 : std::stoll(r.out.substr(at + field.size()));
}

// An ack (or a nack) of many receipts makes its stream reserve once for the room it makes. Told
// receipt by receipt, a full window settled in one request cost a reserve script per receipt, of
// one job each (on Redis 100-200 us apiece: a burst with one stream consumer fell seconds behind).
// `settle` ends the 50 deliveries in one request, in `own` scripts; the window then fills again.
void OneRequestsRoomCostsOneReserve(
    int own, const std::function<void(Client&, int, const std::string&, const std::vector<std::string>&)>& settle) {
  RedisServer redis;
  ServerProcess server({"--durability", "interval", "--store", redis.url()});
  auto client = server.NewClient();
  const std::string queue = NewQueue("settle-many");
  EnqueueN(*client, queue, 100);
  StreamReader stream(server.port(), queue, R"({"max_in_flight": 50})");
  ASSERT_EQ(stream.status(), 200) << stream.head();
  std::vector<std::string> receipts;
  for (int i = 0; i < 50; ++i) {
    auto d = stream.NextDelivery();
    ASSERT_TRUE(d) << i;
    receipts.push_back(d->receipt);
  }
  // The window is full: no reserve is out. The request takes its own scripts; the room it makes,
  // a few more.
  const int64_t before = RedisScriptCalls(redis.port());
  settle(*client, server.port(), queue, receipts);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(stream.NextDelivery()) << i;
  EXPECT_LE(RedisScriptCalls(redis.port()) - before, own + 10);
}

TEST(PushStream, AnAckOfManyMakesOneReserveForTheRoomNotOnePerReceipt) {
  OneRequestsRoomCostsOneReserve(
      1, [](Client& client, int, const std::string& queue, const std::vector<std::string>& receipts) {
        for (const Status& s : client.AckBatch(queue, receipts)) ASSERT_TRUE(s.ok()) << s.ToString();
      });
}

// A nack of many goes through each receipt's own store call (a script each on Redis), and still
// tells the streams once. The raw request: the C++ client nacks one receipt at a time.
TEST(PushStream, ANackOfManyMakesOneReserveForTheRoomNotOnePerReceipt) {
  OneRequestsRoomCostsOneReserve(
      50, [](Client&, int port, const std::string& queue, const std::vector<std::string>& receipts) {
        std::string body = R"({"retry_in_ms": 3600000, "receipts": [)";
        for (size_t i = 0; i < receipts.size(); ++i) body += (i ? ",\"" : "\"") + receipts[i] + "\"";
        body += "]}";
        const std::string answer = RawExchange(port, Post("/v1/queues/" + queue + "/nack", body));
        ASSERT_EQ(StatusOf(answer), 200) << answer;
      });
}

TEST(PushStream, TheWindowHoldsOnPostgres) {
  PostgresServer pg;
  ServerProcess server({"--durability", "interval", "--store", pg.NewDatabase()});
  auto client = server.NewClient();
  TheWindowHolds(server.port(), *client, "pg-window");
}

}  // namespace
}  // namespace delayq::testing

namespace delayq::testing {

// Over TLS a client that hangs up politely sends close_notify before its FIN: bytes to read, as a
// pipelined request would be. A waiting reserve or wait for an outcome must still end with it.
TEST(PushStream, OverTlsAWaitWhoseClientHangsUpEnds) {
  TlsServer tls;
  auto& [certs, server, client] = tls;
  auto made = client->Enqueue("w", {.payload = "1", .when = {.delay_ms = 3'600'000}});
  ASSERT_TRUE(made.ok());
  for (bool shutdown : {true, false}) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, certs.ca().c_str(), nullptr);
    std::vector<std::pair<int, SSL*>> connections;
    const std::string get = WaitingGet("w", made->id, 60'000);
    const std::string reserve = WaitingReserve("r", 60'000);
    for (const std::string* request : {&get, &reserve}) {
      const int fd = ConnectFrom(server.port());
      ASSERT_GE(fd, 0);
      SSL* ssl = SSL_new(ctx);
      SSL_set_fd(ssl, fd);
      ASSERT_EQ(SSL_connect(ssl), 1);
      ASSERT_EQ(SSL_write(ssl, request->data(), static_cast<int>(request->size())), static_cast<int>(request->size()));
      connections.emplace_back(fd, ssl);
    }
    ASSERT_TRUE(OpenWaitsBecome(*client, 2)) << OpenWaits(*client);
    for (auto [fd, ssl] : connections) {
      // A client waiting for its answer has read the server's session tickets: its close is then
      // a FIN, not a reset for unread bytes.
      timeval tv{0, 200'000};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char byte;
      ASSERT_LE(SSL_read(ssl, &byte, 1), 0);
      ERR_clear_error();
      if (shutdown) SSL_shutdown(ssl);  // close_notify, as curl and OpenSSL's s_client send
      SSL_free(ssl);
      ::close(fd);
    }
    SSL_CTX_free(ctx);
    EXPECT_TRUE(OpenWaitsBecome(*client, 0))
        << OpenWaits(*client) << " waits outlived their clients (close_notify sent: " << shutdown << ")";
  }
}

}  // namespace delayq::testing
