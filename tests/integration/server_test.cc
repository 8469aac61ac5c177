// The real `delayq serve`: the conformance suite through delayq::Client, the wire protocol
// spoken raw (bad input battery), kill -9 under load, SIGTERM.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "integration/server_fixture.h"

namespace delayq::testing {
namespace {

// One server for the conformance suite (every test uses its own queue names); stopped at exit.
ServerProcess& SharedServer() {
  static ServerProcess server({"--durability", "interval"});
  return server;
}

class ClientHarness : public QueueHarness {
 public:
  ClientHarness() : client_(SharedServer().NewClient()) {}
  Queue& queue() override { return *client_; }
  int64_t NowMs() override { return SystemClock().NowMs(); }
  void Advance(int64_t ms) override { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
  bool exact_time() const override { return false; }

 private:
  std::unique_ptr<Client> client_;
};

INSTANTIATE_TEST_SUITE_P(HttpClient, QueueConformance,
                         ::testing::Values(HarnessFactory{
                             "server", [] { return std::make_unique<ClientHarness>(); }}),
                         HarnessName);

// Sends raw bytes on a fresh connection, then its end (with `cork`, bytes and end leave in one
// segment, so the server reads them together), and returns everything the server answers until
// it closes or `limit` bytes arrived.
std::string RawExchange(int port, const std::string& bytes, size_t limit = 1 << 20, bool cork = false) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const int on = 1;
  if (cork) ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The server's resident memory, as its /metrics reports it (-1 when it cannot be read).
double ResidentBytes(int port, const std::string& authorization = "") {
  std::string metrics = RawExchange(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + authorization +
                                              "Connection: close\r\n\r\n");
  const std::string name = "\ndelayq_process_resident_memory_bytes ";
  const size_t at = metrics.find(name);
  return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + name.size()));
}

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

int StatusOf(const std::string& response) {
  if (response.size() < 12 || response.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::stoi(response.substr(9, 3));
}

TEST(Server, BadInputBatteryLeavesTheServerUpAndTheStoreUnchanged) {
  ServerProcess server({"--max-body", "2000000"});
  auto client = server.NewClient();
  ASSERT_TRUE(client->Enqueue("battery", {.payload = "1", .when = {.delay_ms = 60'000}}).ok());
  const QueueStats before = *client->Stats("battery");
  const std::string path = "/v1/queues/battery/jobs";
  struct Case {
    std::string name, request;
    int status;
  };
  std::vector<Case> cases = {
      {"truncated JSON", Post(path, R"({"payload": {"a": )"), 400},
      {"not JSON", Post(path, "payload=1"), 400},
      {"wrong type", Post(path, R"({"payload":1,"delay_ms":"soon"})"), 400},
      {"deep nesting", Post(path, std::string(100000, '[') + std::string(100000, ']')), 400},
      {"non-UTF-8", Post(path, "{\"payload\":\"\xc3\x28\"}"), 400},
      {"payload over max_payload", Post(path, R"({"payload":")" + std::string(1100000, 'x') + R"("})"), 413},
      {"body over --max-body", Post(path, std::string(3000000, ' ')), 413},
      {"bad queue name", Post("/v1/queues/%00bad/jobs", R"({"payload":1})"), 400},
      {"negative delay", Post(path, R"({"payload":1,"delay_ms":-5})"), 400},
      {"bad duration", Post(path, R"({"payload":1,"delay":"5 parsecs"})"), 400},
      {"unknown route", "GET /v2/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 404},
      {"wrong method", "PUT " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 405},
      {"malformed HTTP", "HELLO\r\n\r\n", 400},
      {"body shorter than Content-Length", "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"pay", 400},
      {"huge header", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + std::string(100000, 'a') + "\r\n\r\n", 431},
  };
  for (const auto& c : cases) {
    std::string response = RawExchange(server.port(), c.request);
    EXPECT_EQ(StatusOf(response), c.status) << c.name << ": " << response.substr(0, 300);
    if (c.status >= 400) {
      EXPECT_NE(response.find("{\"error\":{\"code\":"), std::string::npos) << c.name;
    }
    ASSERT_TRUE(client->Ping().ok()) << "the server went down after: " << c.name << "\n" << server.log();
  }
  const QueueStats after = *client->Stats("battery");
  EXPECT_EQ(after.scheduled, before.scheduled);
  EXPECT_EQ(after.ready, before.ready);
  EXPECT_EQ(after.counters.enqueued, before.counters.enqueued);
}

TEST(Server, KeepAliveServesManyRequestsOnOneConnection) {
  ServerProcess server;
  std::string requests;
  for (int i = 0; i < 50; ++i) {
    requests += "POST /v1/queues/ka/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"payload\":1}";
  }
  requests += "GET /v1/queues/ka HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  std::string response = RawExchange(server.port(), requests);
  size_t created = 0;
  for (size_t pos = 0; (pos = response.find("HTTP/1.1 201", pos)) != std::string::npos; ++pos) ++created;
  EXPECT_EQ(created, 50u);
  EXPECT_NE(response.find("\"ready\":50"), std::string::npos);
}

// A client that sends a reserve and hangs up at once (a consumer killed, a cancelled long poll)
// is gone before the server reads the request: the reserve takes no job. It used to take one,
// which then sat leased to nobody for the whole lease (the HTTP client's cancel raced this in
// the conformance suite under ASan: the next waiter got nothing for 30 s).
TEST(Server, AReserveFromAClientThatHungUpTakesNoJob) {
  auto client = SharedServer().NewClient();
  static int run = 0;
  const std::string queue = "hung-up-reserve-" + std::to_string(++run);
  for (const int wait_ms : {0, 5'000}) {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(client->Enqueue(queue, EnqueueRequest{.payload = "\"p\""}).ok());
      RawExchange(SharedServer().port(),
                  Post("/v1/queues/" + queue + "/reserve", R"({"max":10,"wait_ms":)" + std::to_string(wait_ms) + "}"),
                  1 << 20, /*cork=*/true);
    }
  }
  auto s = client->Stats(queue);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->reserved, 0);
  EXPECT_EQ(s->ready, 40);
  // A client that stays to read the answer gets them.
  ReserveRequest r;
  r.max = 100;
  auto got = client->Reserve(queue, r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 40u);
}

TEST(Server, KillNineUnderLoadLosesNoAcknowledgedEnqueue) {
  ServerProcess server({"--durability", "sync"});
  std::mutex mu;
  std::set<std::string> acknowledged;
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  for (int t = 0; t < 8; ++t) {
    producers.emplace_back([&] {
      auto client = server.NewClient({.timeout_ms = 5000});
      for (int i = 0; !stop; ++i) {
        auto e = client->Enqueue("crash", {.payload = "{\"n\":" + std::to_string(i) + "}",
                                           .when = {.delay_ms = i % 2 ? 0 : 3'600'000}});
        if (!e.ok()) return;  // the server is gone
        std::lock_guard lock(mu);
        acknowledged.insert(e->id);
      }
    });
  }
  // Consumers hold some jobs when the server dies: they must come back after the lease.
  auto consumer = server.NewClient();
  std::set<std::string> held;
  while (held.size() < 50) {
    auto got = consumer->Reserve("crash", {.max = 10, .wait_ms = 1000, .lease_ms = 2000});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (auto& d : *got) held.insert(d.id);
  }
  while (true) {
    std::lock_guard lock(mu);
    if (acknowledged.size() >= 2000) break;
  }
  EXPECT_EQ(server.Kill(), 128 + SIGKILL);
  stop = true;
  for (auto& t : producers) t.join();
  server.Restart();
  auto client = server.NewClient();
  size_t lost = 0;
  for (const auto& id : acknowledged) {
    if (!client->Get("crash", JobRef::ById(id)).ok()) ++lost;
  }
  EXPECT_EQ(lost, 0u) << "of " << acknowledged.size() << " acknowledged enqueues";
  // The held jobs are handed out again once their 2 s lease has passed.
  std::set<std::string> again;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (again.size() < held.size() && std::chrono::steady_clock::now() < deadline) {
    auto got = client->Reserve("crash", {.max = 1000, .wait_ms = 500});
    ASSERT_TRUE(got.ok());
    for (auto& d : *got) {
      if (held.contains(d.id)) again.insert(d.id);
    }
  }
  EXPECT_EQ(again, held);
  std::cout << "kill -9: " << acknowledged.size() << " acknowledged enqueues, " << lost
            << " lost; " << again.size() << "/" << held.size() << " held jobs redelivered\n";
}

// Consumers long-poll while jobs come due and another client's requests fail: every job is
// delivered and every poll is answered within its wait. (Before the operation guard, the failing
// requests dropped the answers they had collected: 43 of 3 000 jobs arrived.)
TEST(Server, ConsumersAreServedWhileAnotherClientsRequestsFail) {
  ServerProcess server;
  auto producer = server.NewClient();
  constexpr int kJobs = 1500;
  std::vector<EnqueueRequest> jobs;
  for (int i = 0; i < kJobs; ++i) {
    jobs.push_back({.payload = std::to_string(i), .when = {.delay_ms = (i * 2000) / kJobs}});
  }
  for (size_t i = 0; i < jobs.size(); i += 500) {
    ASSERT_TRUE(producer->EnqueueBatch("mixed", std::span(jobs).subspan(i, 500)).ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> received{0}, slow_polls{0}, failed_polls{0};
  std::atomic<int64_t> longest_ms{0};
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::vector<std::thread> threads;
  for (int c = 0; c < 4; ++c) {
    threads.emplace_back([&] {
      auto client = server.NewClient();
      while (!stop) {
        const auto started = std::chrono::steady_clock::now();
        auto got = client->Reserve("mixed", {.max = 16, .wait_ms = 3000});
        const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - started).count();
        longest_ms = std::max<int64_t>(longest_ms, ms);
        if (ms > 3000 + 1000) ++slow_polls;
        if (!got.ok()) {
          ++failed_polls;
          continue;
        }
        std::vector<std::string> receipts;
        for (auto& d : *got) receipts.push_back(d.receipt);
        if (!receipts.empty()) (void)client->AckBatch("mixed", receipts);
        if (!got->empty()) {
          std::lock_guard lock(done_mu);
          received += static_cast<int>(got->size());
          done_cv.notify_all();
        }
      }
    });
  }
  threads.emplace_back([&] {  // requests that must fail, as fast as they come back
    auto noisy = server.NewClient();
    while (!stop) {
      EXPECT_EQ(noisy->Ack("mixed", "not-a-receipt").code(), Code::kInvalidArgument);
      EXPECT_EQ(noisy->Stats("no-such-queue").code(), Code::kNotFound);
      EXPECT_EQ(noisy->Ack("no-such-queue", "01ARZ3NDEKTSV4RRFFQ69G5FAV.00000000000000aa").code(),
                Code::kNotFound);
      EXPECT_EQ(noisy->Nack("mixed", {"01ARZ3NDEKTSV4RRFFQ69G5FAV.00000000000000aa"}).code(),
                Code::kInvalidArgument);  // not a receipt this server issued
    }
  });
  {
    std::unique_lock lock(done_mu);
    done_cv.wait_for(lock, std::chrono::seconds(30), [&] { return received >= kJobs; });
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(received.load(), kJobs);
  EXPECT_EQ(slow_polls.load(), 0) << "the longest poll took " << longest_ms << " ms for a 3000 ms wait";
  EXPECT_EQ(failed_polls.load(), 0);
  auto s = producer->Stats("mixed");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ready + s->reserved + s->scheduled, 0);
}

TEST(Server, SigtermAnswersWaitingReservesAndExitsZero) {
  ServerProcess server;
  auto client = server.NewClient();
  auto waiting = std::async(std::launch::async, [&] {
    return client->Reserve("term", {.max = 1, .wait_ms = 60'000});
  });
  // The reserve is waiting once the server's metrics say so (each look is a round trip).
  auto observer = server.NewClient();
  bool registered = false;
  for (int i = 0; i < 10'000 && !registered; ++i) {
    auto m = observer->Metrics();
    registered = m.ok() && m->find("delayq_reserve_waiting 1") != std::string::npos;
  }
  ASSERT_TRUE(registered);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(server.Terminate(), 0) << server.log();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 5.0) << "SIGTERM took too long";
  auto answer = waiting.get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE(answer->empty());
}

TEST(Server, BearerTokenEndToEnd) {
  ServerProcess server({"--auth-token", "t0ken"});
  EXPECT_TRUE(server.NewClient()->Ping().ok()) << "/healthz needs no token";
  EXPECT_EQ(server.NewClient()->ListQueues().code(), Code::kUnauthenticated);
  EXPECT_EQ(server.NewClient({.auth_token = "wrong"})->ListQueues().code(), Code::kUnauthenticated);
  EXPECT_TRUE(server.NewClient({.auth_token = "t0ken"})->ListQueues().ok());
}

// The scheme is case-insensitive (RFC 7235); tokens that differ anywhere, or only in length,
// are refused.
TEST(Server, BearerSchemeInAnyCaseAndNearMissTokens) {
  ServerProcess server({"--auth-token", "t0ken"});
  auto status = [&](const std::string& authorization) {
    std::string response = RawExchange(server.port(), "GET /v1/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " +
                                                          authorization + "\r\nConnection: close\r\n\r\n");
    return response.substr(0, 12);
  };
  EXPECT_EQ(status("Bearer t0ken"), "HTTP/1.1 200");
  EXPECT_EQ(status("bearer t0ken"), "HTTP/1.1 200");
  EXPECT_EQ(status("BEARER t0ken"), "HTTP/1.1 200");
  for (const char* wrong : {"Bearer t0ke", "Bearer t0kenn", "Bearer T0ken", "Bearer", "Basic t0ken", "t0ken",
                            "Bearer x0ken"}) {
    EXPECT_EQ(status(wrong), "HTTP/1.1 401") << wrong;
  }
}

// Request smuggling: "Transfer-Encoding: chunked, identity" was read as a request without a
// body, and the bytes after it ran as a second request (201). Any Transfer-Encoding but
// "chunked", or one beside Content-Length, is 400 and the connection closes.
TEST(Server, ATransferEncodingOtherThanChunkedIsRefusedAndNothingIsSmuggled) {
  ServerProcess server;
  const std::string smuggled =
      "POST /v1/queues/smuggled/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"payload\":1}";
  for (const std::string& te : {std::string("chunked, identity"), std::string("identity"), std::string("gzip"),
                                std::string("chunked, chunked"), std::string("xchunked")}) {
    std::string response = RawExchange(
        server.port(), "POST /v1/queues/front/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: " + te + "\r\n\r\n" +
                           smuggled);
    EXPECT_EQ(response.substr(0, 12), "HTTP/1.1 400") << te << ": " << response;
    EXPECT_EQ(response.find("HTTP/1.1 201"), std::string::npos) << te << ": the second request ran";
  }
  std::string both = RawExchange(server.port(),
                                 "POST /v1/queues/front/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 13\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\nd\r\n{\"payload\":1}\r\n0\r\n\r\n" + smuggled);
  EXPECT_EQ(both.substr(0, 12), "HTTP/1.1 400") << both;
  EXPECT_EQ(both.find("HTTP/1.1 201"), std::string::npos);
  // Chunked alone is fine.
  std::string chunked = RawExchange(server.port(),
                                    "POST /v1/queues/front/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                                    "Connection: close\r\n\r\nd\r\n{\"payload\":1}\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.substr(0, 12), "HTTP/1.1 201") << chunked;
  auto client = server.NewClient();
  EXPECT_EQ(client->Stats("smuggled").code(), Code::kNotFound) << "the smuggled request created a queue";
}

// The token from a file (not visible in ps); a server reachable beyond loopback refuses to
// start without one unless told --insecure-no-auth (it exits before it binds).
TEST(Server, TokenFileAndNoTokenBeyondLoopback) {
  TempDir dir;
  std::ofstream(dir.Sub("token")) << "  s3cret-from-file \n";
  ServerProcess server({"--auth-token-file", dir.Sub("token")});
  EXPECT_EQ(server.NewClient()->ListQueues().code(), Code::kUnauthenticated);
  EXPECT_TRUE(server.NewClient({.auth_token = "s3cret-from-file"})->ListQueues().ok());

  std::ofstream(dir.Sub("empty")) << "\n";
  RunResult empty = RunProcess({DELAYQ_BIN, "serve", "--listen", "127.0.0.1:0", "--data", dir.Sub("d1"),
                                "--auth-token-file", dir.Sub("empty")});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("the first line is empty"), std::string::npos) << empty.err;
  RunResult missing = RunProcess({DELAYQ_BIN, "serve", "--listen", "127.0.0.1:0", "--data", dir.Sub("d2"),
                                  "--auth-token-file", dir.Sub("nope")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("cannot read it"), std::string::npos) << missing.err;

  RunResult open = RunProcess({DELAYQ_BIN, "serve", "--listen", "0.0.0.0:0", "--data", dir.Sub("d3")});
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.err.find("--insecure-no-auth"), std::string::npos) << open.err;
  EXPECT_NE(open.err.find("--auth-token-file"), std::string::npos) << open.err;
}

// The JSON parser kept buffers of several times the largest body it had parsed, for good: three
// 60 MiB bodies left 2.3 GiB resident. After large requests, memory goes back near its baseline.
TEST(Server, MemoryGoesBackAfterLargeRequests) {
  ServerProcess server({"--threads", "2"});
  auto rss = [&] { return ResidentBytes(server.port()); };
  // A batch of 2 000 jobs of 10 KiB each: valid JSON, parsed whole, then refused (over 1 000).
  std::string body = R"({"jobs":[)";
  const std::string job = R"({"payload":")" + std::string(10 * 1024, 'x') + R"("})";
  for (int i = 0; i < 2000; ++i) body += (i ? "," : "") + job;
  body += "]}";
  const double before = rss();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 4; ++i) {  // on both server threads, twice
    std::string response = RawExchange(server.port(), "POST /v1/queues/big/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                      "Content-Type: application/json\r\nConnection: close\r\n"
                                                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_EQ(response.substr(0, 12), "HTTP/1.1 413") << response.substr(0, 300);
  }
  const double after = rss();
  std::cout << "RSS " << before / 1048576 << " MiB before, " << after / 1048576 << " MiB after 4 bodies of "
            << body.size() / 1048576 << " MiB" << std::endl;
  EXPECT_LT(after - before, 64.0 * 1048576) << "the parse of a 20 MiB body stayed resident";
}

// The attack of the security issue, over the wire: with no token, a page's cross-site request
// (text/plain, Origin and Host of evil.example) enqueued (201) and paused a queue (200).
TEST(Server, ACrossSiteOrRebindingRequestChangesNothing) {
  ServerProcess server;
  auto send = [&](const std::string& path, const std::string& headers, const std::string& body) {
    return RawExchange(server.port(), "POST " + path + " HTTP/1.1\r\n" + headers + "Connection: close\r\n"
                                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body)
        .substr(0, 12);
  };
  const std::string evil = "Host: evil.example\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\n";
  EXPECT_EQ(send("/v1/queues/x/jobs", evil, R"({"payload":1})"), "HTTP/1.1 403");
  EXPECT_EQ(send("/v1/queues/x/pause", evil, ""), "HTTP/1.1 403");
  const std::string page = "Host: 127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\n";
  EXPECT_EQ(send("/v1/queues/x/jobs", page, R"({"payload":1})"), "HTTP/1.1 403");
  EXPECT_EQ(send("/v1/queues/x/pause", "Host: 127.0.0.1\r\nContent-Type: text/plain\r\n", ""), "HTTP/1.1 415");
  EXPECT_EQ(server.NewClient()->Stats("x").code(), Code::kNotFound) << "a refused request created the queue";
  EXPECT_TRUE(server.NewClient()->Pause("x").ok()) << "the client sends JSON even without a body";
}

// The body was read before the token was checked: 20 unauthenticated connections, each sending
// 63 MiB of a declared 64 MiB body, took RSS from 20 to 1 280 MiB. A large body is now refused
// from its header (401) and never read.
TEST(Server, ALargeBodyIsNotReadBeforeItsTokenIsChecked) {
  ServerProcess server({"--auth-token", "t0ken"});
  const std::string header = "POST /v1/queues/x/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             "Content-Length: " + std::to_string(60 << 20) + "\r\n\r\n";
  // The header alone: answered 401 at once (before, the server waited for the body).
  std::string response = RawExchange(server.port(), header);
  EXPECT_EQ(response.substr(0, 12), "HTTP/1.1 401") << response.substr(0, 200);
  auto rss = [&] { return ResidentBytes(server.port(), "Authorization: Bearer t0ken\r\n"); };
  const double before = rss();
  ASSERT_GT(before, 0);
  // Ten clients push 30 MiB each of a declared 60 MiB body, all at once.
  std::vector<std::thread> attackers;
  for (int i = 0; i < 10; ++i) {
    attackers.emplace_back([&] {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(server.port()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
        timeval tv{5, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        std::string chunk = header + std::string(1 << 20, ' ');
        for (int mib = 0; mib < 30; ++mib) {
          if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;  // refused and closed
          chunk.assign(1 << 20, ' ');
        }
      }
      ::close(fd);
    });
  }
  for (auto& t : attackers) t.join();
  const double after = rss();
  std::cout << "RSS " << before / 1048576 << " MiB before, " << after / 1048576
            << " MiB after 10 unauthenticated 30 MiB bodies" << std::endl;
  EXPECT_LT(after - before, 32.0 * 1048576) << "unauthenticated bodies were buffered";
  // Small bodies are still read and answered (so the client reads the 401, not a reset).
  EXPECT_EQ(RawExchange(server.port(), Post("/v1/queues/x/jobs", R"({"payload":1})")).substr(0, 12), "HTTP/1.1 401");
}

TEST(Server, RefusesAPortInUseWithAClearError) {
  ServerProcess first;
  TempDir dir;
  RunResult r = RunProcess({DELAYQ_BIN, "serve", "--listen", "127.0.0.1:" + std::to_string(first.port()),
                     "--data", dir.Sub("d")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot listen"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace delayq::testing
