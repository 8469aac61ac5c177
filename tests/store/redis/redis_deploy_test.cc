// The Redis store the way Redis is deployed (issue 27): a password (requirepass), an ACL user, TLS
// (rediss://, a private CA, client certificates), a Sentinel-managed master failing over while
// jobs are written, and a Redis Cluster that requires a password. Real redis-server and
// redis-sentinel processes; every error names the problem, never the password.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "store/redis/doctor.h"
#include "store/redis/redis_connection.h"
#include "store/redis/redis_fixture.h"
#include "store/redis/redis_queue.h"

namespace delayq::testing {
namespace {

constexpr const char* kSecret = "s3cr3t-pw%x";  // %: the URL form percent-encodes it

std::string Url(const std::string& scheme, const std::string& userinfo, int port, const std::string& rest = "") {
  return scheme + "://" + userinfo + (userinfo.empty() ? "" : "@") + "127.0.0.1:" + std::to_string(port) + rest;
}

Result<std::unique_ptr<redis::RedisQueue>> Open(const std::string& url, const std::string& password = "") {
  redis::RedisQueueOptions o;
  o.url = url;
  o.password = password;
  return redis::RedisQueue::Open(o);
}

// The order story, short: an order's timeout enqueued, delivered, acked.
void ExpectTheOrderStory(Queue& q) {
  auto e = q.Enqueue("orders", EnqueueRequest{.payload = R"({"order":42})", .key = "order-42"});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ReserveRequest r;
  r.wait_ms = 5'000;
  auto got = q.Reserve("orders", r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].key, "order-42");
  EXPECT_TRUE(q.Ack("orders", (*got)[0].receipt).ok());
}

void ExpectNoSecret(const Status& s) {
  EXPECT_EQ(s.message().find("s3cr3t"), std::string::npos) << "an error printed the password: " << s.message();
}

TEST(RedisDeploy, APasswordFromTheUrlTheFileOrTheEnvironment) {
  RedisServer redis({"--requirepass", kSecret});
  auto q = Open(Url("redis", ":s3cr3t-pw%25x", redis.port()));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectTheOrderStory(**q);
  q->reset();
  auto from_option = Open(Url("redis", "", redis.port()), kSecret);  // --redis-password-file, DELAYQ_REDIS_PASSWORD
  ASSERT_TRUE(from_option.ok()) << from_option.status().ToString();

  auto none = Open(Url("redis", "", redis.port()));
  ASSERT_EQ(none.code(), Code::kUnauthenticated) << none.status().ToString();
  EXPECT_NE(none.status().message().find("NOAUTH"), std::string::npos) << none.status().message();
  EXPECT_NE(none.status().message().find("--redis-password-file"), std::string::npos);
  auto wrong = Open(Url("redis", ":wrong-s3cr3t", redis.port()));
  ASSERT_EQ(wrong.code(), Code::kUnauthenticated) << wrong.status().ToString();
  EXPECT_NE(wrong.status().message().find("WRONGPASS"), std::string::npos) << wrong.status().message();
  ExpectNoSecret(wrong.status());
  EXPECT_EQ(redis::RedisUrl::Redacted(Url("redis", "app:s3cr3t", redis.port(), "/0")),
            "redis://app:***@127.0.0.1:" + std::to_string(redis.port()) + "/0");
}

TEST(RedisDeploy, AnAclUserAndADatabase) {
  RedisServer redis({"--user", "default", "off", "--user", "app", "on", ">s3cr3t", "~*", "&*", "+@all"});
  auto q = Open(Url("redis", "app:s3cr3t", redis.port(), "/3"));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectTheOrderStory(**q);
  // The jobs are in database 3: the default database has none of delayq's keys.
  RunResult keys =
      RunProcess({"redis-cli", "-p", std::to_string(redis.port()), "--user", "app", "-n", "0", "keys", "dq:*"},
                 {{"REDISCLI_AUTH", "s3cr3t"}});
  EXPECT_EQ(keys.out.find("dq:"), std::string::npos) << keys.out;
  auto wrong_user = Open(Url("redis", "nobody:s3cr3t", redis.port()));
  EXPECT_EQ(wrong_user.code(), Code::kUnauthenticated);
  ExpectNoSecret(wrong_user.status());
  auto default_user = Open(Url("redis", ":s3cr3t", redis.port()));
  EXPECT_EQ(default_user.code(), Code::kUnauthenticated) << "the default user is off";
  auto no_password = redis::RedisUrl::Parse(Url("redis", "app", redis.port()));
  EXPECT_EQ(no_password.code(), Code::kInvalidArgument);
  auto bad_db = Open(Url("redis", "app:s3cr3t", redis.port(), "/99"));
  EXPECT_EQ(bad_db.code(), Code::kInvalidArgument) << bad_db.status().ToString();
}

TEST(RedisDeploy, TlsWithAPrivateCaAClientCertificateAndAPassword) {
  TestCerts certs;
  std::vector<std::string> args = certs.RedisArgs(false);
  args.insert(args.end(), {"--requirepass", kSecret});
  RedisServer redis(args, "", /*tls=*/true);
  const std::string auth = ":s3cr3t-pw%25x";
  auto q = Open(Url("rediss", auth, redis.port(), "?ca=" + certs.ca()));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectTheOrderStory(**q);
  q->reset();

  auto untrusted = Open(Url("rediss", auth, redis.port()));  // the system's CAs do not know this one
  ASSERT_EQ(untrusted.code(), Code::kUnavailable);
  EXPECT_NE(untrusted.status().message().find("not trusted"), std::string::npos) << untrusted.status().message();
  ExpectNoSecret(untrusted.status());
  auto wrong_name = Open(Url("rediss", auth, redis.port(), "?ca=" + certs.ca() + "&server_name=redis.example"));
  EXPECT_EQ(wrong_name.code(), Code::kUnavailable) << "the certificate names 127.0.0.1, not redis.example";
  auto insecure = Open(Url("rediss", auth, redis.port(), "?insecure=true"));
  EXPECT_TRUE(insecure.ok()) << insecure.status().ToString();
  auto plain = Open(Url("redis", auth, redis.port()));  // plain text to the TLS port
  EXPECT_EQ(plain.code(), Code::kUnavailable);
  auto options_without_tls = redis::RedisUrl::Parse(Url("redis", "", redis.port(), "?ca=x"));
  EXPECT_EQ(options_without_tls.code(), Code::kInvalidArgument);
  auto missing_ca = Open(Url("rediss", auth, redis.port(), "?ca=/nonexistent.pem"));
  EXPECT_EQ(missing_ca.code(), Code::kInvalidArgument);
  EXPECT_NE(missing_ca.status().message().find("?ca="), std::string::npos);

  // A Redis that wants client certificates.
  RedisServer strict(certs.RedisArgs(true), "", /*tls=*/true);
  auto without = Open(Url("rediss", "", strict.port(), "?ca=" + certs.ca()));
  EXPECT_EQ(without.code(), Code::kUnavailable) << "no client certificate";
  auto with = Open(Url("rediss", "", strict.port(),
                       "?ca=" + certs.ca() + "&cert=" + certs.cert("client") + "&key=" + certs.key("client")));
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  ExpectTheOrderStory(**with);
  auto half = redis::RedisUrl::Parse(Url("rediss", "", strict.port(), "?cert=" + certs.cert("client")));
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(Open(Url("rediss", "", strict.port(), "?cert=" + certs.cert("client"))).code(), Code::kInvalidArgument);
}

// Found when Close began to interrupt the subscriber's read: OpenSSL's socket BIO writes with
// write(), so a TLS write to a connection Redis had closed raised SIGPIPE and ended the process
// (a library must not; the server does not ignore SIGPIPE). Writes now go through send() with
// MSG_NOSIGNAL, as plain-text ones did, and such a write is an error like any other.
TEST(RedisDeploy, AWriteToATlsConnectionRedisClosedIsAnErrorNotASignal) {
  TestCerts certs;
  RedisServer redis(certs.RedisArgs(false), "", /*tls=*/true);
  redis::RedisTlsOptions tls_options{.enabled = true, .ca_file = certs.ca()};
  auto tls = redis::MakeRedisTls(tls_options);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  auto conn = redis::RedisConnection::Open(redis::Endpoint{"127.0.0.1", redis.port()}, {}, tls->get(), 2000);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  ASSERT_TRUE((*conn)->Send({{"PING"}}).ok());
  ASSERT_TRUE((*conn)->Read(2000).ok());
  redis.Kill();
  Status last;
  for (int i = 0; i < 20 && last.ok(); ++i) last = (*conn)->Send({{"PING"}});  // the first may still "succeed"
  EXPECT_EQ(last.code(), Code::kUnavailable) << last.ToString();
}

// A Sentinel-managed master fails over while jobs are enqueued: every enqueue answered ok is on
// the new master (writes wait for the replica: --redis-wait-replicas 1), and the store follows
// the master without a restart.
TEST(RedisDeploy, ASentinelFailoverLosesNoAcknowledgedJob) {
  RedisServer master({"--appendonly", "yes"});
  RedisServer replica({"--appendonly", "yes", "--replicaof", "127.0.0.1", std::to_string(master.port())});
  std::vector<std::unique_ptr<RedisSentinel>> sentinels;
  for (int i = 0; i < 3; ++i) sentinels.push_back(std::make_unique<RedisSentinel>("main", master.port()));
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"redis-cli", "-p", std::to_string(sentinels[0]->port())});
    return RunProcess(args);
  };
  // The replica in sync, and the Sentinels told of it (INFO, every 10 s at first): paced polls.
  for (int i = 0; i < 300; ++i) {
    RunResult info = RunProcess({"redis-cli", "-p", std::to_string(master.port()), "INFO", "replication"});
    if (info.out.find("state=online") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int i = 0; i < 300 && cli({"SENTINEL", "replicas", "main"}).out.find("slave") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string url = "redis-sentinel://";
  for (size_t i = 0; i < sentinels.size(); ++i) {
    url += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(sentinels[i]->port());
  }
  url += "/main";
  redis::RedisQueueOptions o;
  o.url = url;
  o.wait_replicas = 1;
  o.wait_timeout_ms = 2'000;
  auto q = redis::RedisQueue::Open(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectTheOrderStory(**q);

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<std::string> acknowledged;
  int refused = 0;
  std::thread producer([&] {
    for (int i = 0; !stop; ++i) {
      auto e = (*q)->Enqueue(
          "failover", EnqueueRequest{.payload = "1", .when = {.delay_ms = 3'600'000}, .key = "k" + std::to_string(i)});
      std::lock_guard lock(mu);
      if (e.ok()) {
        acknowledged.insert(e->id);
      } else {
        ++refused;
      }
    }
  });
  auto count = [&] {
    std::lock_guard lock(mu);
    return acknowledged.size();
  };
  while (count() < 200) std::this_thread::yield();
  const size_t before = count();
  RunResult failover = cli({"SENTINEL", "FAILOVER", "main"});
  ASSERT_EQ(failover.exit_code, 0) << failover.err;
  // The new master is the old replica: once the Sentinels say so, writes go on there.
  for (int i = 0;
       i < 300 && cli({"SENTINEL", "get-master-addr-by-name", "main"}).out.find(std::to_string(replica.port())) ==
                      std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(cli({"SENTINEL", "get-master-addr-by-name", "main"}).out.find(std::to_string(replica.port())),
            std::string::npos)
      << "the failover did not happen";
  const size_t at_failover = count();
  for (int i = 0; i < 3000 && count() < at_failover + 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a paced look at the producer's count
  }
  stop = true;
  producer.join();
  EXPECT_GE(count(), at_failover + 200) << "enqueues went on after the failover (refused meanwhile: " << refused << ")";
  EXPECT_GT(at_failover, before);
  // Every acknowledged job is on the new master.
  size_t missing = 0;
  for (const std::string& id : acknowledged) {
    if (!(*q)->Get("failover", JobRef::ById(id)).ok()) ++missing;
  }
  EXPECT_EQ(missing, 0u) << "of " << acknowledged.size() << " acknowledged jobs";
  ExpectTheOrderStory(**q);
}

TEST(RedisDeploy, ARedisClusterWithAPassword) {
  RedisCluster cluster(kSecret);
  const std::string url = cluster.url_text();
  auto encoded = url;
  encoded.replace(encoded.find(kSecret), std::string(kSecret).size(), "s3cr3t-pw%25x");
  auto q = Open(encoded);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectTheOrderStory(**q);
  for (int i = 0; i < 20; ++i) {  // queues on every master
    ASSERT_TRUE((*q)->Enqueue("q" + std::to_string(i), EnqueueRequest{.payload = "1"}).ok());
  }
  auto wrong = Open(std::string("redis-cluster://:nope@") + url.substr(url.find('@') + 1));
  EXPECT_EQ(wrong.code(), Code::kUnavailable);  // every node refused: none of them could be asked
  ExpectNoSecret(wrong.status());
}

TEST(RedisDeploy, DoctorNamesAnUncheckedCertificateAndSentinelsThatCannotAgree) {
  TestCerts certs;
  RedisServer tls(certs.RedisArgs(false), "", /*tls=*/true);
  auto findings = redis::Doctor(Url("rediss", "", tls.port(), "?insecure=true"));
  ASSERT_TRUE(findings.ok()) << findings.status().ToString();
  bool insecure = false;
  for (const auto& f : *findings) insecure = insecure || f.problem.find("not checked") != std::string::npos;
  EXPECT_TRUE(insecure) << "?insecure=true is named";

  RedisServer master;
  RedisSentinel lonely("solo", master.port());  // quorum 2 with one Sentinel: no failover possible
  findings = redis::Doctor("redis-sentinel://127.0.0.1:" + std::to_string(lonely.port()) + "/solo");
  ASSERT_TRUE(findings.ok()) << findings.status().ToString();
  bool quorum = false;
  for (const auto& f : *findings) quorum = quorum || f.problem.find("cannot fail the master over") != std::string::npos;
  EXPECT_TRUE(quorum);

  RedisServer locked({"--requirepass", kSecret});
  auto refused = redis::Doctor(Url("redis", "", locked.port()));
  EXPECT_EQ(refused.code(), Code::kUnauthenticated);
  EXPECT_TRUE(redis::Doctor(Url("redis", "", locked.port()), kSecret).ok());
}

}  // namespace
}  // namespace delayq::testing
