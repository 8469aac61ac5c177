// The SQL API (SPEC §11.2) on the application's own connection and transaction: what commits is
// delivered and woken at once, what rolls back leaves nothing, bad input is refused with SQLSTATE
// 22023 naming the field (as the C++ rules refuse it: the twin test), and the role
// delayq_producer can call the four functions and nothing else.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "core/trace_context.h"
#include "core/validate.h"
#include "store/postgres/doctor.h"
#include "store/postgres/pg_fixture.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

// The application's connection: statements and the error of the last one.
class AppConnection {
 public:
  explicit AppConnection(const std::string& url) : c_(PQconnectdb(url.c_str())) {
    if (PQstatus(c_) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(c_));
  }
  ~AppConnection() { PQfinish(c_); }
  // The first column of the first row ("" when none); false (and sqlstate(), message()) on error.
  bool Run(const std::string& sql, std::string* value = nullptr) {
    PGresult* r = PQexec(c_, sql.c_str());
    const auto st = PQresultStatus(r);
    const bool ok = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
    sqlstate_ = ok ? "" : (PQresultErrorField(r, PG_DIAG_SQLSTATE) ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : "");
    message_ = ok ? ""
                  : (PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                                                                    : PQerrorMessage(c_));
    if (ok && value) *value = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return ok;
  }
  std::string Value(const std::string& sql) {
    std::string v;
    if (!Run(sql, &v)) throw std::runtime_error(sql + ": " + message_);
    return v;
  }
  const std::string& sqlstate() const { return sqlstate_; }
  const std::string& message() const { return message_; }

 private:
  PGconn* c_;
  std::string sqlstate_, message_;
};

class SqlApi : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = SharedPostgres().NewDatabase();
    postgres::PostgresQueueOptions o;
    o.url = url_;
    o.safety_interval_ms = 60'000;  // every wake-up must come from its notification
    auto q = postgres::PostgresQueue::Open(o);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    store_ = std::move(*q);
    app_ = std::make_unique<AppConnection>(url_);
  }
  std::string url_;
  std::unique_ptr<postgres::PostgresQueue> store_;
  std::unique_ptr<AppConnection> app_;
};

TEST_F(SqlApi, ACommittedEnqueueIsDeliveredAtOnceAndARolledBackOneLeavesNothing) {
  ASSERT_TRUE(app_->Run("BEGIN"));
  const std::string lost = app_->Value("SELECT id FROM delayq.enqueue('orders', '{\"order\": 1}')");
  ASSERT_TRUE(app_->Run("ROLLBACK"));
  EXPECT_EQ(store_->Get("orders", JobRef::ById(lost)).code(), Code::kNotFound) << "a rolled-back enqueue left a job";

  // A reserve waits; the transaction enqueues a job due now but has not committed: nothing is
  // delivered until it does, then the notification at commit wakes the reserve at once.
  ASSERT_TRUE(app_->Run("BEGIN"));
  const std::string id = app_->Value("SELECT id FROM delayq.enqueue('orders', '{\"order\": 2}', key => 'order-2')");
  auto waiting =
      std::async(std::launch::async, [&] { return store_->Reserve("orders", {.max = 1, .wait_ms = 10'000}); });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "delivered before the commit";
  const auto committed = std::chrono::steady_clock::now();
  ASSERT_TRUE(app_->Run("COMMIT"));
  auto got = waiting.get();
  const auto took = std::chrono::steady_clock::now() - committed;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, id);
  EXPECT_EQ((*got)[0].payload, "{\"order\": 2}") << "the payload's JSON text is kept as given";
  EXPECT_EQ((*got)[0].key, "order-2");
  EXPECT_LT(took, 1000ms) << "woken by the notification, not by the safety probe (60 s here)";
}

TEST_F(SqlApi, ACancelTakesEffectOnlyIfItsTransactionCommits) {
  app_->Value("SELECT id FROM delayq.enqueue('orders', '{}', delay_ms => 60000, key => 'timeout-7')");
  ASSERT_TRUE(app_->Run("BEGIN"));
  EXPECT_EQ(app_->Value("SELECT delayq.cancel('orders', 'timeout-7')"), "t");
  ASSERT_TRUE(app_->Run("ROLLBACK"));
  EXPECT_TRUE(store_->Get("orders", JobRef::ByKey("timeout-7")).ok()) << "a rolled-back cancel took effect";
  ASSERT_TRUE(app_->Run("BEGIN"));
  EXPECT_EQ(app_->Value("SELECT delayq.cancel('orders', 'timeout-7')"), "t");
  ASSERT_TRUE(app_->Run("COMMIT"));
  EXPECT_EQ(store_->Get("orders", JobRef::ByKey("timeout-7")).code(), Code::kNotFound);
  EXPECT_EQ(app_->Value("SELECT delayq.cancel('orders', 'timeout-7')"), "f") << "a second cancel finds nothing";
}

TEST_F(SqlApi, CancelJobAndRescheduleActOnTheSameRowsAsTheServer) {
  EnqueueRequest r;
  r.payload = "from the server";
  r.key = "shared";
  r.when.delay_ms = 60'000;
  auto made = store_->Enqueue("orders", r);
  ASSERT_TRUE(made.ok());
  // The key rule is one SQL function for both: the application's enqueue finds the server's job.
  const std::string dup =
      app_->Value("SELECT id || ' ' || duplicate FROM delayq.enqueue('orders', '{}', key => 'shared')");
  EXPECT_EQ(dup, made->id + " true");
  const int64_t due = std::stoll(app_->Value("SELECT delayq.reschedule('orders', 'shared', delay_ms => 120000)"));
  auto job = store_->Get("orders", JobRef::ById(made->id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->due_at_ms, due);
  EXPECT_EQ(app_->Value("SELECT delayq.cancel_job('orders', '" + made->id + "')"), "t");
  EXPECT_EQ(store_->Get("orders", JobRef::ById(made->id)).code(), Code::kNotFound);
}

TEST_F(SqlApi, AReservedJobCannotBeCancelledAndSaysSo) {
  app_->Value("SELECT id FROM delayq.enqueue('orders', '{}', key => 'busy')");
  auto got = store_->Reserve("orders", {.max = 1});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_FALSE(app_->Run("SELECT delayq.cancel('orders', 'busy')"));
  EXPECT_EQ(app_->sqlstate(), "55000");
  EXPECT_NE(app_->message().find("reserved"), std::string::npos) << app_->message();
}

// Each hostile call is refused with 22023 naming its field, creates nothing, and the C++ rules
// (core/validate.h, what HTTP applies) refuse the same request: the two languages agree.
TEST_F(SqlApi, BadInputIsRefusedWith22023NamingTheFieldAsTheHttpRulesDo) {
  struct Case {
    std::string args;    // after the queue
    std::string field;   // what the message names first
    EnqueueRequest cpp;  // the same request to the C++ rules (empty payload: not comparable)
  };
  auto req = [](auto&& change) {
    EnqueueRequest r;
    r.payload = "{}";
    change(r);
    return r;
  };
  const std::string big_key(513, 'k'), big_group(129, 'g');
  std::vector<Case> cases = {
      {"'{}', delay_ms => -1", "delay_ms", req([](EnqueueRequest& r) { r.when.delay_ms = -1; })},
      {"'{}', key => '" + big_key + "'", "key", req([&](EnqueueRequest& r) { r.key = big_key; })},
      {"'{}', max_attempts => 0", "max_attempts", req([](EnqueueRequest& r) { r.max_attempts = 0; })},
      {"'{}', max_attempts => 1001", "max_attempts", req([](EnqueueRequest& r) { r.max_attempts = 1001; })},
      {"'{}', priority => -1", "priority", req([](EnqueueRequest& r) { r.priority = -1; })},
      {"'{}', priority => 10", "priority", req([](EnqueueRequest& r) { r.priority = 10; })},
      {"'{}', \"group\" => '" + big_group + "'", "group", req([&](EnqueueRequest& r) { r.group = big_group; })},
      {"'{}', on_key => 'replace'", "on_key", req([](EnqueueRequest& r) { r.replace = true; })},
      {"'{}', headers => '{\"\": \"x\"}'", "headers", req([](EnqueueRequest& r) { r.headers[""] = "x"; })},
      {"'{}', delay_ms => 5, deliver_at => now()", "delay_ms", req([](EnqueueRequest& r) {
         r.when.delay_ms = 5;
         r.when.deliver_at_ms = 1;
       })},
      {"'{}', on_key => 'upsert', key => 'k'", "on_key", EnqueueRequest{}},
      {"'{}', headers => '[1]'", "headers", EnqueueRequest{}},
      {"'{}', headers => '{\"a\": 1}'", "headers", EnqueueRequest{}},
      {"'{}', deliver_at => 'infinity'", "deliver_at", EnqueueRequest{}},
      {"NULL", "payload", EnqueueRequest{}},
      // JSON that PostgreSQL's json type keeps but HTTP's parser refuses (a hostile try found it).
      {"'\"\\ud800\"'", "payload", EnqueueRequest{}},
      {"'[\"\\udc00\\ud800\"]'", "payload", EnqueueRequest{}},
      {"'{}', headers => '{\"a\": \"x\\udbff\"}'", "headers", EnqueueRequest{}},
      {"'\"\\\\ud800\\udc00\"'", "payload", EnqueueRequest{}},  // an escaped \ before "ud800"
      {"'{}', delay_ms => 9223372036854775807", "delay_ms",
       req([](EnqueueRequest& r) { r.when.delay_ms = INT64_MAX; })},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    EXPECT_FALSE(app_->Run("SELECT * FROM delayq.enqueue('hostile', " + c.args + ")"));
    EXPECT_EQ(app_->sqlstate(), "22023") << app_->message();
    EXPECT_EQ(app_->message().rfind(c.field, 0), 0u) << app_->message();
    if (!c.cpp.payload.empty()) {
      const QueueConfig defaults;
      Status cpp = ValidateEnqueue(c.cpp, defaults);
      if (cpp.ok()) cpp = ResolveDue(c.cpp.when, 0, defaults).status();
      EXPECT_FALSE(cpp.ok()) << "the C++ rules accept what SQL refuses";
    }
  }
  for (const char* queue : {"''", "'bad queue'", "NULL",
                            "'"
                            "x"
                            "'||repeat('q', 128)",
                            "'.'", "'..'"}) {  // dot segments: refused by the C++ rule too (v7_1)
    EXPECT_FALSE(app_->Run(std::string("SELECT * FROM delayq.enqueue(") + queue + ", '{}')")) << queue;
    EXPECT_EQ(app_->sqlstate(), "22023");
    EXPECT_EQ(app_->message().rfind("queue", 0), 0u) << app_->message();
  }
  for (const char* dots : {".", ".."}) EXPECT_FALSE(ValidateQueueName(dots).ok()) << "the C++ rule: " << dots;

  EXPECT_EQ(app_->Value("SELECT count(*) FROM delayq.queues"), "0") << "a refused call made a queue";
  EXPECT_EQ(app_->Value("SELECT count(*) FROM delayq.jobs"), "0");
}

TEST_F(SqlApi, AQueuesLimitsApplyToTheSqlApiToo) {
  QueueConfig small;
  small.max_payload = 10;
  small.max_delay_ms = 1000;
  ASSERT_TRUE(store_->SetConfig("small", small).ok());
  EXPECT_FALSE(app_->Run("SELECT * FROM delayq.enqueue('small', '\"a payload longer than ten bytes\"')"));
  EXPECT_EQ(app_->sqlstate(), "DQ413");
  EXPECT_FALSE(app_->Run("SELECT * FROM delayq.enqueue('small', '1', delay_ms => 5000)"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_FALSE(app_->Run("SELECT * FROM delayq.enqueue('small', '1', deliver_at => now() + interval '1 hour')"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_EQ(app_->Value("SELECT count(*) FROM delayq.jobs"), "0");
}

TEST_F(SqlApi, TheProducerRoleMayCallTheApiAndNothingElse) {
  SharedPostgres().Psql(url_.substr(url_.rfind('/') + 1),
                        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'app') THEN "
                        "CREATE ROLE app LOGIN; END IF; END $$; GRANT delayq_producer TO app");
  std::string app_url = url_;
  app_url.replace(app_url.find("postgres@"), 9, "app@");
  AppConnection app(app_url);
  const std::string id = app.Value("SELECT id FROM delayq.enqueue('orders', '{}', key => 'k1')");
  EXPECT_EQ(id.size(), 26u);
  EXPECT_EQ(app.Value("SELECT delayq.reschedule('orders', 'k1', delay_ms => 1000) > 0"), "t");
  EXPECT_EQ(app.Value("SELECT delayq.cancel('orders', 'k1')"), "t");
  EXPECT_EQ(app.Value("SELECT id FROM delayq.enqueue('orders', '{}', traceparent => "
                      "'00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')")
                .size(),
            26u);
  for (const char* forbidden :
       {"SELECT count(*) FROM delayq.jobs", "DELETE FROM delayq.queues",
        "SELECT * FROM delayq._enqueue_v1('orders', '{}', 0, NULL, NULL, NULL, '{\"traceparent\": \"x\"}', 0, "
        "NULL, 'dedupe')",
        "SELECT delayq._with_trace(NULL, NULL, NULL)",
        "SELECT * FROM delayq._put('orders', 'X', 'x'::bytea, false, NULL, 0, NULL, NULL, NULL, 'dedupe', 0, 0, '', "
        "true)",
        "SELECT * FROM delayq._reserve('orders', 1, NULL, 1000, ARRAY['0'])", "UPDATE delayq.meta SET value = 'x'"}) {
    SCOPED_TRACE(forbidden);
    EXPECT_FALSE(app.Run(forbidden));
    EXPECT_EQ(app.sqlstate(), "42501") << app.message();  // insufficient_privilege
  }
  // delayq doctor run as this role (docs/postgres.md asks for it) checks its settings, and does
  // not take the tables it may not read for a missing schema ("run delayq migrate").
  auto findings = postgres::Doctor(app_url);
  ASSERT_TRUE(findings.ok()) << findings.status().ToString();
  for (const auto& f : *findings) EXPECT_NE(f.setting, "schema delayq") << f.problem;
}

// Producers racing on one key in their own transactions: one job, and every caller is told its id.
TEST_F(SqlApi, RacingTransactionsOnOneKeyMakeOneJob) {
  constexpr int kProducers = 8;
  std::vector<std::string> ids(kProducers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kProducers; ++i) {
    threads.emplace_back([&, i] {
      AppConnection c(url_);
      c.Run("BEGIN");
      ids[static_cast<size_t>(i)] =
          c.Value("SELECT id FROM delayq.enqueue('race', '{}', delay_ms => 60000, key => 'once')");
      c.Run("COMMIT");
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& id : ids) EXPECT_EQ(id, ids[0]);
  EXPECT_EQ(app_->Value("SELECT count(*) FROM delayq.jobs WHERE queue = 'race'"), "1");
}

}  // namespace
}  // namespace delayq::testing

namespace delayq::testing {
namespace {

// Found in review: a dedupe locked the live job's row until the application committed, so the
// worker holding that job could neither ack nor touch it meanwhile.
TEST_F(SqlApi, ADedupeInAnOpenTransactionDoesNotHoldUpTheWorkerOfThatJob) {
  app_->Value("SELECT id FROM delayq.enqueue('orders', '{}', key => 'k')");
  auto got = store_->Reserve("orders", {.max = 1});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  ASSERT_TRUE(app_->Run("BEGIN"));
  EXPECT_EQ(app_->Value("SELECT duplicate FROM delayq.enqueue('orders', '{}', key => 'k')"), "t");
  auto ack = std::async(std::launch::async, [&] { return store_->Ack("orders", (*got)[0].receipt); });
  EXPECT_EQ(ack.wait_for(5s), std::future_status::ready) << "the ack waited for the producer's transaction";
  ASSERT_TRUE(app_->Run("COMMIT"));
  EXPECT_TRUE(ack.get().ok());
}

// Found by a hostile pass: an application transaction left open after it enqueued with a key held
// every server request for that key until it ended, and eight of them held all of the server's
// threads (/healthz and SIGTERM too). A request now waits at most lock_timeout (5 s, or the one
// the URL, role or database sets) and answers 503, having changed nothing.
TEST_F(SqlApi, AnApplicationTransactionLeftOpenHoldsARequestAtMostTheLockTimeout) {
  postgres::PostgresQueueOptions o;
  o.url = url_ + "?options=-c%20lock_timeout%3D300";
  auto short_wait = postgres::PostgresQueue::Open(o);
  ASSERT_TRUE(short_wait.ok()) << short_wait.status().ToString();
  ASSERT_TRUE(app_->Run("BEGIN"));
  app_->Value("SELECT id FROM delayq.enqueue('orders', '{}', key => 'K', delay_ms => 600000)");
  for (Queue* store : {static_cast<Queue*>(short_wait->get()), static_cast<Queue*>(store_.get())}) {
    auto enqueue = std::async(std::launch::async, [&] {
      return store->Enqueue("orders", {.payload = "{}", .when = {.delay_ms = 1000}, .key = "K"});
    });
    if (enqueue.wait_for(30s) != std::future_status::ready) {
      app_->Run("ROLLBACK");  // lets the request end
      FAIL() << "the request waited for the application's transaction";
    }
    auto e = enqueue.get();
    EXPECT_EQ(e.code(), Code::kUnavailable) << (e.ok() ? "enqueued" : e.status().ToString());
    EXPECT_NE(e.status().message().find("lock_timeout"), std::string::npos) << e.status().message();
    EXPECT_NE(e.status().message().find("try again"), std::string::npos) << e.status().message();
  }
  ASSERT_TRUE(app_->Run("COMMIT"));
  auto again = (*short_wait)->Enqueue("orders", {.payload = "{}", .when = {.delay_ms = 1000}, .key = "K"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(app_->Value("SELECT count(*) FROM delayq.jobs WHERE key = 'K'"), "1");
}

// Found in review: a queue deleted while a transaction enqueued into it left that job in no
// queue, invisible to every call. Now the delete waits for the transaction and refuses.
TEST_F(SqlApi, AQueueDeletedWhileATransactionEnqueuesIntoItKeepsTheJob) {
  app_->Value("SELECT id FROM delayq.enqueue('doomed', '{}', delay_ms => 60000)");
  const std::string first = app_->Value("SELECT id FROM delayq.jobs");
  ASSERT_EQ(store_->Cancel("doomed", JobRef::ById(first)).code(), Code::kOk);
  ASSERT_TRUE(app_->Run("BEGIN"));
  const std::string id = app_->Value("SELECT id FROM delayq.enqueue('doomed', '{}', delay_ms => 60000)");
  auto deleting = std::async(std::launch::async, [&] { return store_->DeleteQueue("doomed", false); });
  EXPECT_EQ(deleting.wait_for(300ms), std::future_status::timeout) << "the delete did not wait for the enqueue";
  ASSERT_TRUE(app_->Run("COMMIT"));
  auto deleted = deleting.get();
  EXPECT_EQ(deleted.code(), Code::kConflict) << (deleted.ok() ? "deleted" : deleted.status().ToString());
  EXPECT_TRUE(store_->Get("doomed", JobRef::ById(id)).ok()) << "the committed job was lost with its queue";
}

// The delete holds the queue's advisory lock, not a foreign key (whose row lock, taken by every
// enqueue, made a multixact per job): an enqueue after a delete makes the queue again, even in a transaction
// whose snapshot still shows the queue (REPEATABLE READ: nothing would have made it then), and a
// forced delete waits for the enqueue and deletes its job with the queue.
TEST_F(SqlApi, NoJobOutlivesItsQueueUnderEitherIsolation) {
  for (const std::string isolation : {"READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"}) {
    SCOPED_TRACE(isolation);
    const std::string queue = "again-" + std::to_string(isolation.size());
    const std::string first = app_->Value("SELECT id FROM delayq.enqueue('" + queue + "', '{}', delay_ms => 60000)");
    ASSERT_EQ(store_->Cancel(queue, JobRef::ById(first)).code(), Code::kOk);
    ASSERT_TRUE(app_->Run("BEGIN ISOLATION LEVEL " + isolation));
    ASSERT_EQ(app_->Value("SELECT count(*) FROM delayq.queues WHERE name = '" + queue + "'"), "1");  // the snapshot
    ASSERT_TRUE(store_->DeleteQueue(queue, false).ok());
    const std::string id = app_->Value("SELECT id FROM delayq.enqueue('" + queue + "', '{}', delay_ms => 60000)");
    ASSERT_TRUE(app_->Run("COMMIT"));
    EXPECT_TRUE(store_->Get(queue, JobRef::ById(id)).ok()) << "the job was left in no queue";
    auto queues = store_->ListQueues();
    ASSERT_TRUE(queues.ok());
    EXPECT_TRUE(std::ranges::any_of(*queues, [&](const auto& q) { return q.name == queue; })) << "the queue is gone";
  }
  ASSERT_TRUE(app_->Run("BEGIN"));
  const std::string id = app_->Value("SELECT id FROM delayq.enqueue('forced', '{}', delay_ms => 60000)");
  auto deleting = std::async(std::launch::async, [&] { return store_->DeleteQueue("forced", true); });
  EXPECT_EQ(deleting.wait_for(300ms), std::future_status::timeout) << "the delete did not wait for the enqueue";
  ASSERT_TRUE(app_->Run("COMMIT"));
  auto deleted = deleting.get();
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(app_->Value("SELECT count(*) FROM delayq.jobs WHERE queue = 'forced'"), "0");
}

// Found in review: on a database whose default is REPEATABLE READ, with a URL carrying its own
// options= (which replaced the store's startup options), the delete's snapshot came from before
// its wait: it counted no job, deleted the queue and left the job the transaction committed.
TEST_F(SqlApi, ADeleteWaitsAndSeesTheJobWhateverTheDatabasesIsolation) {
  const std::string db = url_.substr(url_.rfind('/') + 1);
  SharedPostgres().Psql(db, "ALTER DATABASE " + db + " SET default_transaction_isolation = 'repeatable read'");
  postgres::PostgresQueueOptions o;
  o.url = url_ + "?options=-c%20statement_timeout%3D0";
  auto store = postgres::PostgresQueue::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  AppConnection app(url_);
  ASSERT_TRUE(app.Run("BEGIN"));
  const std::string id = app.Value("SELECT id FROM delayq.enqueue('held', '{}', delay_ms => 60000)");
  ASSERT_TRUE(app.Run("COMMIT"));
  ASSERT_EQ((*store)->Cancel("held", JobRef::ById(id)).code(), Code::kOk);
  ASSERT_TRUE(app.Run("BEGIN"));
  const std::string kept = app.Value("SELECT id FROM delayq.enqueue('held', '{}', delay_ms => 60000)");
  auto deleting = std::async(std::launch::async, [&] { return (*store)->DeleteQueue("held", false); });
  EXPECT_EQ(deleting.wait_for(300ms), std::future_status::timeout) << "the delete did not wait for the enqueue";
  ASSERT_TRUE(app.Run("COMMIT"));
  auto deleted = deleting.get();
  EXPECT_EQ(deleted.code(), Code::kConflict) << (deleted.ok() ? "deleted" : deleted.status().ToString());
  EXPECT_TRUE((*store)->Get("held", JobRef::ById(kept)).ok()) << "the committed job was lost with its queue";
}

TEST_F(SqlApi, AnEmptyKeyIsNoKeyAsOverHttp) {
  const std::string a = app_->Value("SELECT id FROM delayq.enqueue('orders', '{}', key => '')");
  const std::string b = app_->Value("SELECT id FROM delayq.enqueue('orders', '{}', key => '')");
  EXPECT_NE(a, b) << "two jobs without a key were made one";
  auto job = store_->Get("orders", JobRef::ById(a));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->key, "");
}

}  // namespace
}  // namespace delayq::testing

namespace delayq::testing {
namespace {

// Found in review: a reschedule without a delay or a time made the job due at once (a forgotten
// argument fired the timeout); it is refused now. A key with no job answers NULL.
// What HTTP takes, SQL takes: \u0000 in a header (PostgreSQL text cannot hold it) and a surrogate
// pair; and the errors of hostile values stay short and say their unit.
TEST_F(SqlApi, WhatHttpTakesSqlTakesAndHostileValuesGetShortErrors) {
  const std::string id = app_->Value(
      "SELECT id FROM delayq.enqueue('odd', '\"\\ud83d\\ude00\"', headers => '{\"a\\u0000b\": \"x\\u0000y\"}')");
  auto job = store_->Get("odd", JobRef::ById(id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->payload, "\"\\ud83d\\ude00\"");
  ASSERT_EQ(job->headers.size(), 1u);
  EXPECT_EQ(job->headers.begin()->first, std::string("a\0b", 3));
  EXPECT_EQ(job->headers.begin()->second, std::string("x\0y", 3));

  EXPECT_FALSE(app_->Run("SELECT delayq.cancel_job('odd', repeat('x', 10000))"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_LT(app_->message().size(), 200u) << "the error echoes the whole id";
  EXPECT_EQ(app_->message().rfind("id ", 0), 0u) << app_->message();
  EXPECT_FALSE(app_->Run("SELECT delayq.enqueue('odd', '{}', headers => '{\"a\": \"x\", \"a\": \"y\"}')"));
  EXPECT_EQ(app_->sqlstate(), "22023") << "a header named twice, which HTTP refuses";
  EXPECT_EQ(app_->message(), "headers name the header 'a' twice; give each header once");
  EXPECT_FALSE(app_->Run("SELECT delayq.enqueue(repeat('q', 100000), '{}')"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_LT(app_->message().size(), 400u) << "the error echoes the whole queue name";
  EXPECT_EQ(app_->message().rfind("queue ", 0), 0u) << app_->message().substr(0, 300);

  app_->Value("SELECT id FROM delayq.enqueue('odd', '{}', delay_ms => 60000, key => 'k')");
  EXPECT_FALSE(app_->Run("SELECT delayq.reschedule('odd', 'k', delay_ms => 9223372036854775807)"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_NE(app_->message().find("9223372036854775807 ms"), std::string::npos) << app_->message();
  EXPECT_NE(app_->message().find(std::to_string(QueueConfig{}.max_delay_ms) + " ms"), std::string::npos)
      << app_->message();
}

TEST_F(SqlApi, ARescheduleNeedsANewDueTimeAndAnswersNullForNoJob) {
  app_->Value("SELECT id FROM delayq.enqueue('orders', '{}', delay_ms => 60000, key => 'late')");
  EXPECT_FALSE(app_->Run("SELECT delayq.reschedule('orders', 'late')"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_EQ(app_->message().rfind("delay_ms and deliver_at are both missing", 0), 0u) << app_->message();
  // Both given: the hint must not offer "neither", which a reschedule refuses (found by a hostile try).
  EXPECT_FALSE(app_->Run("SELECT delayq.reschedule('orders', 'late', 5, now())"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_EQ(app_->message(), "delay_ms and deliver_at are both given; give one of them") << app_->message();
  auto job = store_->Get("orders", JobRef::ByKey("late"));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kScheduled) << "the refused reschedule moved the job";
  EXPECT_EQ(app_->Value("SELECT coalesce(delayq.reschedule('orders', 'nobody', delay_ms => 1000)::text, 'null')"),
            "null");
}

// W3C Trace Context through the SQL API: as arguments or headers, kept in the headers as the
// server keeps it; and one table of values judged by the C++ rules and the SQL rules alike (the
// two must not drift apart).
TEST_F(SqlApi, ATraceContextIsKeptAsTheServerKeepsItAndJudgedByTheSameRules) {
  const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const std::string id = app_->Value("SELECT id FROM delayq.enqueue('traced', '1', traceparent => '" + parent +
                                     "', tracestate => 'rojo=1', headers => '{\"tenant\": \"a\\u0000b\"}')");
  auto job = store_->Get("traced", JobRef::ById(id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(TraceParentOf(job->headers), parent);
  EXPECT_EQ(TraceStateOf(job->headers), "rojo=1");
  EXPECT_EQ(job->headers.at("tenant"), std::string("a\0b", 3)) << "the other headers kept as given";
  const std::string as_header =
      app_->Value("SELECT id FROM delayq.enqueue('traced', '2', headers => '{\"traceparent\": \"" + parent + "\"}')");
  EXPECT_EQ(TraceParentOf(store_->Get("traced", JobRef::ById(as_header))->headers), parent);
  EXPECT_FALSE(
      app_->Run("SELECT * FROM delayq.enqueue('traced', '3', traceparent => '" + parent +
                "', headers => '{\"traceparent\": \"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}')"));
  EXPECT_EQ(app_->sqlstate(), "22023");
  EXPECT_EQ(app_->message().rfind("traceparent and headers.traceparent are both given", 0), 0u) << app_->message();
  // A hostile producer's spellings: a name written with escapes, and a name given twice.
  for (const std::string& headers : {std::string(R"({"\u0074raceparent": "00-abc"})"),
                                     R"({"traceparent": ")" + parent + R"(", "traceparent": "00-abc"})"}) {
    SCOPED_TRACE(headers);
    EXPECT_FALSE(app_->Run("SELECT * FROM delayq.enqueue('traced', '4', headers => '" + headers + "')"));
    EXPECT_EQ(app_->sqlstate(), "22023") << app_->message();
  }

  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  const std::optional<std::string> none;
  const std::vector<std::pair<std::optional<std::string>, std::optional<std::string>>> table = {
      {parent, none},
      {parent, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
      {parent, " a=1 ,, b@vendor=x y"},
      {parent, ""},
      {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more", none},
      {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", none},
      {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", none},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", none},
      {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", none},
      {parent + "-extra", none},
      {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", none},
      {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-a b", none},
      {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-\x01", none},
      {"02-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + std::string(200, 'x'), none},
      {"02-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + std::string(201, 'x'), none},
      {"02-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-{\"a\":1}", none},
      {"garbage", none},
      {"", none},
      {none, "a=1"},
      {parent, "novalue"},
      {parent, "Upper=1"},
      {parent, "a=1,a=2"},
      {parent, "a=b=c"},
      {parent, std::string(513, 'a')},
      {parent, "a=" + std::string(256, 'v')},
      {parent, "a=" + std::string(257, 'v')},
      {parent, std::string(256, 'k') + "=v"},
      {parent, "t" + std::string(240, 'n') + "@s" + std::string(13, 'y') + "=v"},
      {parent, "t" + std::string(241, 'n') + "@s=v"},
      {parent, many},
      {parent, "a=\t1"},
  };
  auto literal = [](const std::optional<std::string>& v) { return v ? "'" + *v + "'" : std::string("NULL"); };
  for (const auto& [tp, ts] : table) {
    SCOPED_TRACE(literal(tp) + ", " + literal(ts));
    Headers headers;
    if (tp) headers["traceparent"] = *tp;
    if (ts) headers["tracestate"] = *ts;
    const Status cpp = ValidateTraceHeaders(headers, "");
    const std::string sql =
        app_->Value("SELECT coalesce(delayq._trace_problem(" + literal(tp) + ", " + literal(ts) + "), 'ok')");
    EXPECT_EQ(cpp.ok(), sql == "ok") << "C++: " << cpp.ToString() << "\nSQL: " << sql;
    if (!cpp.ok() && sql != "ok") {
      EXPECT_EQ(cpp.message().substr(0, 12), sql.substr(0, 12)) << "the same field named first";
    }
  }
}

}  // namespace
}  // namespace delayq::testing
