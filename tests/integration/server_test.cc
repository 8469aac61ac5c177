// The real `delayq serve`: the conformance suite through delayq::Client, the wire protocol
// spoken raw (bad input battery), kill -9 under load, SIGTERM.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <map>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <fstream>
#include <iostream>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "integration/server_fixture.h"
#include "support/answer_recorder.h"
#include "support/raw_http.h"
#include "support/test_certs.h"

namespace delayq::testing {
namespace {

// One server for the conformance suite (every test uses its own queue names); stopped at exit.
ServerProcess& SharedServer() {
  static ServerProcess server({"--durability", "interval"});
  return server;
}

// The same over HTTPS with mutual TLS: every route, every answer through OpenSSL both ways.
TestCerts& SharedCerts() {
  static TestCerts certs;
  return certs;
}
ServerProcess& SharedTlsServer() {
  static ServerProcess server({"--durability", "interval", "--tls-cert", SharedCerts().cert("server"), "--tls-key",
                               SharedCerts().key("server"), "--tls-client-ca", SharedCerts().ca()});
  return server;
}

class ClientHarness : public QueueHarness {
 public:
  explicit ClientHarness(bool tls = false)
      : server_(tls ? SharedTlsServer() : SharedServer()), tls_(tls), client_(server_.NewClient(Options())) {}
  // The shared server, killed and started again on its data directory and port.
  void Restart() override {
    client_.reset();
    server_.Kill();
    server_.Restart();
    client_ = server_.NewClient(Options());
  }
  Queue& queue() override { return *client_; }
  int64_t NowMs() override { return SystemClock().NowMs(); }
  void Advance(int64_t ms) override { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
  bool exact_time() const override { return false; }
  double StoreCpuSeconds() override { return server_.CpuSeconds(); }
  void AwaitOpenWaits(int64_t n) override {
    for (int i = 0; i < 1000; ++i) {
      if (OpenWaits(*client_) >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a poll of the server's state
    }
    ADD_FAILURE() << n << " waits did not open on the server within 10 s";
  }

 private:
  ClientOptions Options() const {
    ClientOptions o = RecordingOptions();
    if (tls_) {
      o.tls_ca_file = SharedCerts().ca();
      o.tls_cert_file = SharedCerts().cert("client");
      o.tls_key_file = SharedCerts().key("client");
    }
    return o;
  }
  ServerProcess& server_;
  bool tls_;
  std::unique_ptr<Client> client_;
};

INSTANTIATE_TEST_SUITE_P(HttpClient, QueueConformance,
                         ::testing::Values(HarnessFactory{"server", [] { return std::make_unique<ClientHarness>(); }},
                                           HarnessFactory{"https",
                                                          [] { return std::make_unique<ClientHarness>(true); }}),
                         HarnessName);

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
      {"wrong method",
       "PUT " + path +
           " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "
           "0\r\n\r\n",
       405},
      {"malformed HTTP", "HELLO\r\n\r\n", 400},
      {"body shorter than Content-Length",
       "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"pay", 400},
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
    requests +=
        "POST /v1/queues/ka/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
        "13\r\n\r\n{\"payload\":1}";
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
        auto e = client->Enqueue(
            "crash", {.payload = "{\"n\":" + std::to_string(i) + "}", .when = {.delay_ms = i % 2 ? 0 : 3'600'000}});
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
  std::cout << "kill -9: " << acknowledged.size() << " acknowledged enqueues, " << lost << " lost; " << again.size()
            << "/" << held.size() << " held jobs redelivered\n";
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
        const int64_t ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
        longest_ms = std::max<int64_t>(longest_ms, ms);
        // Held well past its wait, a poll was forgotten (a missed wake-up), not slow: 10 s of
        // room for a loaded machine, far less than the client's own timeout.
        if (ms > 3000 + 10'000) ++slow_polls;
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
      EXPECT_EQ(noisy->Ack("no-such-queue", "01ARZ3NDEKTSV4RRFFQ69G5FAV.00000000000000aa").code(), Code::kNotFound);
      EXPECT_EQ(noisy->Nack("mixed", {"01ARZ3NDEKTSV4RRFFQ69G5FAV.00000000000000aa"}).code(),
                Code::kInvalidArgument);  // not a receipt this server issued
    }
  });
  {
    std::unique_lock lock(done_mu);
    done_cv.wait_for(lock, std::chrono::seconds(120), [&] { return received >= kJobs; });  // a cap
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

// A schedule firing every second across a kill -9 and a restart of the server: every second is
// delivered once, none is missed (the runs just ahead were jobs already, and the restarted server
// goes on from where the schedule's state says).
TEST(Server, AScheduleEverySecondAcrossKillNineHasNoDuplicateAndNoGap) {
  ServerProcess server;
  ScheduleSpec tick;
  tick.name = "tick";
  tick.every_ms = 1'000;
  ASSERT_TRUE(server.NewClient()->PutSchedule("cron", tick).ok());
  std::map<int64_t, int> runs;
  auto consume = [&](std::chrono::seconds for_how_long) {
    auto client = server.NewClient();
    const auto stop = std::chrono::steady_clock::now() + for_how_long;
    while (std::chrono::steady_clock::now() < stop) {
      auto got = client->Reserve("cron", {.max = 10, .wait_ms = 200, .lease_ms = 60'000});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (const auto& d : *got) {
        ++runs[std::stoll(d.key.substr(d.key.rfind(':') + 1))];
        ASSERT_TRUE(client->Ack("cron", d.receipt).ok());
      }
    }
  };
  consume(std::chrono::seconds(3));
  server.Kill();
  server.Restart();
  consume(std::chrono::seconds(4));
  ASSERT_GE(runs.size(), 5u);
  for (const auto& [at, n] : runs) EXPECT_EQ(n, 1) << "the run at " << at << " came " << n << " times";
  for (auto it = std::next(runs.begin()); it != runs.end(); ++it) {
    EXPECT_EQ(it->first - std::prev(it)->first, 1'000) << "a gap before " << it->first;
  }
}

TEST(Server, SigtermAnswersWaitingReservesAndExitsZero) {
  ServerProcess server;
  auto client = server.NewClient();
  auto waiting = std::async(std::launch::async, [&] { return client->Reserve("term", {.max = 1, .wait_ms = 60'000}); });
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
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // A sanitizer build's stop (the store's close, the leak check) takes seconds; a waiting
  // reserve left unanswered would hold it for the reserve's whole minute.
  EXPECT_LT(seconds, 20.0) << "SIGTERM took too long";
  auto answer = waiting.get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE(answer->empty());
}

TEST(Server, RefusesAPortInUseWithAClearError) {
  ServerProcess first;
  TempDir dir;
  RunResult r = RunProcess(
      {DELAYQ_BIN, "serve", "--listen", "127.0.0.1:" + std::to_string(first.port()), "--data", dir.Sub("d")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot listen"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace delayq::testing

namespace delayq::testing {

// Waits for an outcome hold no thread but count against --max-waiting (429 past it, naming it);
// a client that hangs up ends its wait; SIGTERM answers the waits 503, "wait again".
TEST(Server, WaitsForAnOutcomeAreBoundedEndedByAHangUpAndAnsweredAtSigterm) {
  ServerProcess server({"--durability", "interval", "--max-waiting", "2"});
  auto client = server.NewClient();
  auto made = client->Enqueue("w", {.payload = "1", .when = {.delay_ms = 3'600'000}});
  ASSERT_TRUE(made.ok());
  const std::string get = WaitingGet("w", made->id, 60'000);
  const int a = ConnectFrom(server.port()), b = ConnectFrom(server.port(), "127.0.0.1", 30);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_EQ(::send(a, get.data(), get.size(), 0), static_cast<ssize_t>(get.size()));
  ASSERT_EQ(::send(b, get.data(), get.size(), 0), static_cast<ssize_t>(get.size()));
  ASSERT_TRUE(OpenWaitsBecome(*client, 2));
  auto refused = client->WaitOutcome("w", JobRef::ById(made->id), 1'000);
  EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--max-waiting"), std::string::npos);
  // Found by a hostile try: a full server refused what needs no wait (wait_ms=0, a final job,
  // no such job) with 429 too.
  auto now = client->WaitOutcome("w", JobRef::ById(made->id), 0);
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(now->state, JobState::kScheduled);
  EXPECT_EQ(client->WaitOutcome("w", JobRef::ById("01M956X62ZASMB4DGHNCD299R2"), 1'000).code(), Code::kNotFound);
  auto doomed = client->Enqueue("w", {.payload = "2", .max_attempts = 1});
  ASSERT_TRUE(doomed.ok());
  auto got = client->Reserve("w", {.max = 1});
  ASSERT_TRUE(got.ok() && got->size() == 1);
  ASSERT_TRUE(client->Nack("w", {(*got)[0].receipt, std::nullopt, "x", true}).ok());
  auto dead = client->WaitOutcome("w", JobRef::ById(doomed->id), 1'000);
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  EXPECT_EQ(dead->state, JobState::kDead);
  // Leading zeros are no digits of the number (a final job: answered though the server is full).
  for (const auto& [id, query] :
       {std::pair{doomed->id, "wait_ms=00000000000000000000001"}, std::pair{made->id, "wait_ms=0"}}) {
    EXPECT_EQ(StatusOf(RawExchange(server.port(), "GET /v1/queues/w/jobs/" + id + "?" + query +
                                                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")),
              200)
        << query;
  }
  const std::string twice =
      RawExchange(server.port(), "GET /v1/queues/w/jobs/" + made->id +
                                     "?wait_ms=1&wait_ms=2 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(twice), 400) << twice;
  EXPECT_NE(twice.find("given twice"), std::string::npos) << twice;
  ::close(a);
  EXPECT_TRUE(OpenWaitsBecome(*client, 1)) << "a hang-up ends its wait";
  EXPECT_EQ(server.Terminate(), 0);
  const std::string answer = ReadAll(b);
  ::close(b);
  EXPECT_EQ(StatusOf(answer), 503) << answer;
  EXPECT_NE(answer.find("wait for the job again"), std::string::npos) << answer;
}

}  // namespace delayq::testing

namespace delayq::testing {

// Every waiting request whose client hangs up ends, however the request's bytes came. CI saw one
// stay: the hang-up watch (a wait for the socket to be readable) can wake with nothing to read, a
// readiness the reactor had noticed before the request's last bytes were read, and a watch that
// woke for nothing stopped watching.
TEST(Server, EveryWaitWhoseClientHangsUpEnds) {
  ServerProcess server({"--durability", "interval", "--max-waiting", "1000"});
  auto client = server.NewClient();
  auto made = client->Enqueue("w", {.payload = "1", .when = {.delay_ms = 3'600'000}});
  ASSERT_TRUE(made.ok());
  const std::string get = WaitingGet("w", made->id, 60'000);
  const std::string reserve = WaitingReserve("r", 60'000);
  for (int round = 0; round < 5; ++round) {
    std::vector<int> sockets;
    for (int i = 0; i < 100; ++i) {
      const std::string& request = i % 2 ? get : reserve;
      const int fd = ConnectFrom(server.port());
      ASSERT_GE(fd, 0);
      // In pieces: the last arrives while the server may be reading the first.
      const size_t cut = request.size() - 1 - static_cast<size_t>(i % 7);
      ASSERT_EQ(::send(fd, request.data(), cut, 0), static_cast<ssize_t>(cut));
      ASSERT_EQ(::send(fd, request.data() + cut, request.size() - cut, 0), static_cast<ssize_t>(request.size() - cut));
      sockets.push_back(fd);
    }
    ASSERT_TRUE(OpenWaitsBecome(*client, 100)) << OpenWaits(*client);
    for (int fd : sockets) ::close(fd);
    ASSERT_TRUE(OpenWaitsBecome(*client, 0)) << OpenWaits(*client) << " waits stayed open in round " << round;
  }
}

}  // namespace delayq::testing

namespace delayq::testing {

// A client that pipelines a request behind its waiting reserve is still there: the reserve waits
// on (the server looks again on a timer while those bytes wait unread) and takes the job that
// comes; the pipelined request is answered after it. Its hang-up then ends a second wait.
TEST(Server, ARequestPipelinedBehindAWaitingReserveDoesNotEndIt) {
  ServerProcess server({"--durability", "interval"});
  auto client = server.NewClient();
  const std::string reserve = WaitingReserve("p", 60'000);
  const int fd = ConnectFrom(server.port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, reserve.data(), reserve.size(), 0), static_cast<ssize_t>(reserve.size()));
  ASSERT_TRUE(OpenWaitsBecome(*client, 1));
  const std::string health = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(::send(fd, health.data(), health.size(), 0), static_cast<ssize_t>(health.size()));
  for (int look = 0; look < 20; ++look) {  // past the server's looks at 10, 30, 70 … 1 270 ms
    ASSERT_EQ(OpenWaits(*client), 1) << "the pipelined request ended the reserve at look " << look;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time for the server's looks to pass
  }
  ASSERT_TRUE(client->Enqueue("p", {.payload = "took"}).ok());
  std::string answers;
  char buf[4096];
  while (answers.find("\"status\"") == std::string::npos || answers.find("dG9vaw==") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << answers;
    answers.append(buf, static_cast<size_t>(n));
  }
  EXPECT_LT(answers.find("dG9vaw=="), answers.find("\"status\"")) << answers;  // base64 of "took"
  ASSERT_EQ(::send(fd, reserve.data(), reserve.size(), 0), static_cast<ssize_t>(reserve.size()));
  ASSERT_TRUE(OpenWaitsBecome(*client, 1));
  ::close(fd);
  EXPECT_TRUE(OpenWaitsBecome(*client, 0)) << "a hang-up ends its wait";
}

}  // namespace delayq::testing

namespace delayq::testing {

// A reserve whose client hung up gives no job to it, also when a request pipelined behind the
// reserve was read with it and more bytes came later (its watch then looks once a second): the
// job a hostile try saw handed to the gone client, reserved until its lease ran out and its
// attempt spent, is ready again with none.
TEST(Server, AReserveGivesNoJobToAClientGoneBehindAPipelinedRequest) {
  ServerProcess server({"--durability", "interval"});
  auto client = server.NewClient();
  const std::string reserve = WaitingReserve("g", 60'000);
  const std::string pipelined = reserve + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const int fd = ConnectFrom(server.port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, pipelined.data(), pipelined.size(), 0), static_cast<ssize_t>(pipelined.size()));
  ASSERT_TRUE(OpenWaitsBecome(*client, 1));
  ASSERT_EQ(::send(fd, "GET /he", 7, 0), 7);
  std::this_thread::sleep_for(std::chrono::milliseconds(1'500));  // the watch's looks are a second apart by now
  ::close(fd);
  auto made = client->Enqueue("g", {.payload = "x"});
  ASSERT_TRUE(made.ok());
  ASSERT_TRUE(OpenWaitsBecome(*client, 0));
  auto job = client->Get("g", JobRef::ById(made->id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kReady);
  EXPECT_EQ(job->attempt, 0);
  auto got = client->Reserve("g", {.max = 1});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u) << "the job went to the client that had hung up";
}

}  // namespace delayq::testing
