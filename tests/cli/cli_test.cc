// The `delayq` command against a real server: output, exit codes, `work`, `dead replay`.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/server_fixture.h"
#include "support/raw_http.h"

namespace delayq::testing {
namespace {

class CliTest : public ::testing::Test {
 protected:
  RunResult Cli(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), DELAYQ_BIN);
    return RunProcess(args, {{"DELAYQ_URL", server_.url()}}, input);
  }
  // Reserves one job of `queue` with `delayq reserve`: its receipt, or "" (a failure is reported).
  std::string ReservedReceipt(const std::string& queue) {
    RunResult r = Cli({"reserve", queue});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.out.find("receipt ");
    if (at == std::string::npos) return "";
    return r.out.substr(at + 8, r.out.find('\n', at) - at - 8);
  }
  ServerProcess server_{{"--durability", "interval"}};
};

TEST_F(CliTest, EnqueueGetCancelWithExitCodes) {
  RunResult e =
      Cli({"enqueue", "orders", R"({"orderId":42})", "--delay", "30m", "--key", "order-42", "-H", "version=2"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("enqueued"), std::string::npos) << e.out;
  const std::string id = e.out.substr(e.out.find("enqueued ") + 9, 26);
  RunResult dup = Cli({"enqueue", "orders", "{}", "--delay", "30m", "--key", "order-42"});
  EXPECT_EQ(dup.exit_code, 0);
  EXPECT_NE(dup.out.find("duplicate of " + id), std::string::npos) << dup.out;
  RunResult g = Cli({"--json", "get", "orders", id});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find(R"("payload":{"orderId":42})"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find(R"("version":"2")"), std::string::npos) << g.out;
  EXPECT_EQ(Cli({"get", "orders", "--key", "order-42"}).exit_code, 0);
  EXPECT_EQ(Cli({"cancel", "orders", id}).exit_code, 0);
  RunResult gone = Cli({"get", "orders", id});
  EXPECT_EQ(gone.exit_code, 3) << "not found";
  EXPECT_NE(gone.err.find("does not exist"), std::string::npos) << gone.err;
  EXPECT_EQ(Cli({"enqueue", "orders", "x", "--delay", "soon"}).exit_code, 2) << "bad input";
  EXPECT_EQ(Cli({"enqueue", "bad name", "x"}).exit_code, 2) << "bad queue name";
  RunResult down = RunProcess({DELAYQ_BIN, "--server", "http://127.0.0.1:1", "stats"});
  EXPECT_EQ(down.exit_code, 5) << "unreachable";
  EXPECT_NE(down.err.find("cannot reach"), std::string::npos) << down.err;
  RunResult text = Cli({"enqueue", "orders", "plain text"});
  ASSERT_EQ(text.exit_code, 0);
  RunResult stdin_payload = Cli({"enqueue", "orders", "-"}, std::string("\x01\x02", 2));
  ASSERT_EQ(stdin_payload.exit_code, 0) << stdin_payload.err;
  RunResult stats = Cli({"stats", "orders"});
  EXPECT_EQ(stats.exit_code, 0);
  EXPECT_NE(stats.out.find("orders"), std::string::npos);
}

// `delayq touch --progress` reports a delivery's progress; `get` shows it while it holds the job,
// and a bad one exits 2 (bad input) naming it.
TEST_F(CliTest, TouchReportsProgressThatGetShows) {
  RunResult e = Cli({"enqueue", "reports", R"({"month":11})"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const std::string id = e.out.substr(e.out.find("enqueued ") + 9, 26);
  const std::string receipt = ReservedReceipt("reports");
  ASSERT_FALSE(receipt.empty());
  RunResult t = Cli({"touch", "reports", receipt, "--lease", "2m", "--progress", R"({"rows": 120})"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("lease until 20"), std::string::npos) << "a date, as get shows it: " << t.out;
  RunResult g = Cli({"get", "reports", id});
  EXPECT_NE(g.out.find(R"(progress    {"rows": 120})"), std::string::npos) << g.out;
  RunResult ls = Cli({"jobs", "ls", "reports", "--state", "reserved"});
  EXPECT_NE(ls.out.find("PROGRESS"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(R"({"rows": 120})"), std::string::npos) << ls.out;
  RunResult bad = Cli({"touch", "reports", receipt, "--progress", "half done"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("progress is not a JSON value"), std::string::npos) << bad.err;
}

// `config --keep-completed` keeps acked jobs; `ack --result` gives each its result, which `get` and
// `jobs ls --state completed` show; a result that is not JSON is refused before anything is acked.
TEST_F(CliTest, AckKeepsAResultThatGetAndTheCompletedListingShow) {
  RunResult c = Cli({"config", "invoices", "--keep-completed", "1d"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("keep completed  1d"), std::string::npos) << c.out;
  RunResult e = Cli({"enqueue", "invoices", R"({"n":7})"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const std::string id = e.out.substr(e.out.find("enqueued ") + 9, 26);
  const std::string receipt = ReservedReceipt("invoices");
  ASSERT_FALSE(receipt.empty());
  RunResult bad = Cli({"ack", "invoices", receipt, "--result", "paid in full"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--result is not a JSON value"), std::string::npos) << bad.err;
  EXPECT_NE(Cli({"get", "invoices", id}).out.find("state       reserved"), std::string::npos) << "nothing acked";
  RunResult a = Cli({"ack", "invoices", receipt, "--result", R"({"paid": 1999})"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  RunResult g = Cli({"get", "invoices", id});
  EXPECT_NE(g.out.find("state       completed"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("completed   20"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find(R"(result      {"paid": 1999})"), std::string::npos) << g.out;
  RunResult ls = Cli({"jobs", "ls", "invoices", "--state", "completed"});
  EXPECT_NE(ls.out.find("RESULT"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(R"({"paid": 1999})"), std::string::npos) << ls.out;
  EXPECT_NE(Cli({"stats", "invoices"}).out.find("completed jobs kept: 1"), std::string::npos);
}

// `delayq wait` shows the outcome (exit 0), or at its --timeout the job as it is with exit 8 so a
// script tells the two apart; a bad timeout or a job that is not there exits 2 or 3.
TEST_F(CliTest, WaitShowsTheOutcomeOrExitsEightAtItsTimeout) {
  RunResult later = Cli({"enqueue", "waits", R"({"n":1})", "--delay", "1h", "--key", "later"});
  ASSERT_EQ(later.exit_code, 0) << later.err;
  const std::string later_id = later.out.substr(later.out.find("enqueued ") + 9, 26);
  RunResult w = Cli({"wait", "waits", later_id, "--timeout", "200ms"});
  EXPECT_EQ(w.exit_code, 8) << w.err;
  EXPECT_NE(w.out.find("state       scheduled"), std::string::npos) << w.out;
  EXPECT_EQ(Cli({"wait", "waits", "--key", "later", "--timeout", "0s"}).exit_code, 8);

  ASSERT_EQ(Cli({"config", "waits", "--keep-completed", "1h"}).exit_code, 0);
  RunResult e = Cli({"enqueue", "waits", R"({"n":2})"});
  const std::string id = e.out.substr(e.out.find("enqueued ") + 9, 26);
  const std::string receipt = ReservedReceipt("waits");
  ASSERT_EQ(Cli({"ack", "waits", receipt, "--result", R"({"paid": 7})"}).exit_code, 0);
  RunResult done = Cli({"--json", "wait", "waits", id, "--timeout", "5m"});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  EXPECT_NE(done.out.find(R"("state":"completed")"), std::string::npos) << done.out;
  EXPECT_NE(done.out.find(R"("result":{"paid": 7})"), std::string::npos) << "as the ack gave it: " << done.out;

  RunResult bad = Cli({"wait", "waits", id, "--timeout", "soon"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--timeout"), std::string::npos) << bad.err;
  EXPECT_EQ(Cli({"wait", "waits", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "--timeout", "1s"}).exit_code, 3);
}

// `bench --lead` moves the window's start: 0ms makes jobs come due while others are still being
// enqueued (what `make bench-peers` measures); a lead longer than the enqueue does not.
// A typo names the nearest command, option or queue, creates nothing, and exits 2 (bad input) or 3
// (no such queue); with --json the error is the server's error object.
TEST_F(CliTest, TyposNameTheNearestCommandOptionOrQueueAndCreateNothing) {
  ASSERT_EQ(Cli({"enqueue", "orders", "1", "--delay", "1h"}).exit_code, 0);
  RunResult sub = Cli({"reserv", "orders"});
  EXPECT_EQ(sub.exit_code, 2);
  EXPECT_NE(sub.err.find(R"(unknown command "reserv" for `delayq` (did you mean "reserve"?))"), std::string::npos)
      << sub.err;
  RunResult nested = Cli({"dead", "lsit", "orders"});
  EXPECT_NE(nested.err.find(R"((did you mean "list"?))"), std::string::npos) << nested.err;
  RunResult option = Cli({"enqueue", "orders", "1", "--dealy", "5s"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.err.find(R"(unknown option "--dealy" for `delayq enqueue` (did you mean "--delay"?))"),
            std::string::npos)
      << option.err;

  RunResult missing = Cli({"reserve", "ordres"});
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_NE(missing.err.find(R"(queue "ordres" does not exist yet)"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find(R"((did you mean "orders"?))"), std::string::npos) << missing.err;
  RunResult stats = Cli({"stats", "ordres"});
  EXPECT_EQ(stats.exit_code, 3) << stats.out << stats.err;
  RunResult json = Cli({"--json", "reserve", "ordres"});
  EXPECT_EQ(json.exit_code, 3);
  auto error = nlohmann::json::parse(json.err, nullptr, false);
  ASSERT_FALSE(error.is_discarded()) << json.err;
  EXPECT_EQ(error["error"]["code"], "not_found");
  RunResult bad_json = Cli({"--json", "enqueue", "orders", "1", "--dealy", "5s"});
  EXPECT_EQ(nlohmann::json::parse(bad_json.err, nullptr, false)["error"]["code"], "invalid_argument") << bad_json.err;
  // None of it created a queue.
  auto queues = server_.NewClient()->ListQueues();
  ASSERT_TRUE(queues.ok());
  ASSERT_EQ(queues->size(), 1u);
  EXPECT_EQ((*queues)[0].name, "orders");

  RunResult version = Cli({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("delayq 0.", 0), 0u) << version.out;
  EXPECT_NE(version.out.find("commit "), std::string::npos) << version.out;
}

// `jobs ls` lists one state a page at a time and says how to get the next page; --all follows
// the cursors; --json answers as the API; a bad state or cursor is bad input (2), a missing queue
// not found (3).
TEST_F(CliTest, JobsLsBrowsesAStateAPageAtATime) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(Cli({"enqueue", "orders", "{\"n\":" + std::to_string(i) + "}", "--delay", std::to_string(10 + i) + "m"})
                  .exit_code,
              0);
  }
  RunResult page = Cli({"jobs", "ls", "orders", "--state", "scheduled", "--limit", "2"});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  EXPECT_NE(page.out.find("{\"n\":0}"), std::string::npos) << page.out;
  EXPECT_NE(page.out.find("{\"n\":1}"), std::string::npos) << page.out;
  EXPECT_EQ(page.out.find("{\"n\":2}"), std::string::npos) << page.out;
  const size_t more = page.out.find("more: delayq jobs ls orders --state scheduled --limit 2 --cursor ");
  ASSERT_NE(more, std::string::npos) << page.out;
  std::string cursor = page.out.substr(page.out.find("--cursor ", more) + 9);
  cursor = cursor.substr(0, cursor.find('\n'));
  RunResult next = Cli({"jobs", "ls", "orders", "--limit", "2", "--cursor", cursor});
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_NE(next.out.find("{\"n\":2}"), std::string::npos) << next.out;
  EXPECT_EQ(next.out.find("{\"n\":1}"), std::string::npos) << next.out;

  RunResult all = Cli({"--json", "jobs", "ls", "orders", "--limit", "2", "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  auto json = nlohmann::json::parse(all.out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << all.out;
  EXPECT_EQ(json["jobs"].size(), 5u);
  EXPECT_TRUE(json["next_cursor"].is_null());
  RunResult ready = Cli({"jobs", "list", "orders", "--state", "ready"});
  EXPECT_EQ(ready.exit_code, 0);
  EXPECT_NE(ready.out.find("no ready jobs"), std::string::npos) << ready.out;

  EXPECT_EQ(Cli({"jobs", "ls", "orders", "--state", "sheduled"}).exit_code, 2);
  RunResult bad = Cli({"jobs", "ls", "orders", "--cursor", "ready.1.2_0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("state=ready"), std::string::npos) << bad.err;
  EXPECT_EQ(Cli({"jobs", "ls", "ordres"}).exit_code, 3);
  RunResult dead = Cli({"dead", "list", "orders", "--limit", "1"});
  EXPECT_EQ(dead.exit_code, 0);
  EXPECT_NE(dead.out.find("no dead jobs"), std::string::npos) << dead.out;
}

// `serve --config FILE` reads serve's options from TOML; a flag wins over its DELAYQ_* variable,
// which wins over the file; an unknown key, a bad value, a table, a TOML syntax error or a missing
// file stops serve with exit 2 and a message naming the file, line and key.
TEST(CliConfigFile, TomlSetsServeOptionsUnderFlagsAndEnvironment) {
  TempDir dir;
  const std::string file = dir.Sub("delayq.toml");
  std::ofstream(file) << "# delayq serve\nmax_queues = 1\naccess-log = true\nallowed-hosts = [\"a.internal\", "
                         "\"b.internal\"]\n";
  {
    ServerProcess server({"--config", file});
    auto c = server.NewClient();
    EnqueueRequest job;
    job.payload = "1";
    ASSERT_TRUE(c->Enqueue("first", job).ok());
    EXPECT_EQ(c->Enqueue("second", job).code(), Code::kResourceExhausted) << "max_queues = 1 from the file";
  }
  {  // The example in packaging/ loads (its listen and data give way to the flags).
    ServerProcess example({"--config", std::string(DELAYQ_SOURCE_DIR) + "/packaging/delayq.toml"});
    EXPECT_TRUE(example.NewClient()->Ping().ok());
  }
  // Which listen address serve refuses (no token beyond loopback) shows which source won.
  std::ofstream(file) << "listen = \"0.0.0.0:1\"\n";
  const std::vector<std::string> serve = {DELAYQ_BIN, "serve", "--data", dir.Sub("d"), "--config", file};
  RunResult from_file = RunProcess(serve);
  EXPECT_EQ(from_file.exit_code, 2) << from_file.err;
  EXPECT_NE(from_file.err.find("0.0.0.0:1"), std::string::npos) << from_file.err;
  RunResult from_env = RunProcess(serve, {{"DELAYQ_LISTEN", "0.0.0.0:2"}});
  EXPECT_NE(from_env.err.find("0.0.0.0:2"), std::string::npos) << "the variable wins over the file: " << from_env.err;
  std::vector<std::string> with_flag = serve;
  with_flag.insert(with_flag.end(), {"--listen", "0.0.0.0:3"});
  RunResult from_flag = RunProcess(with_flag, {{"DELAYQ_LISTEN", "0.0.0.0:2"}});
  EXPECT_NE(from_flag.err.find("0.0.0.0:3"), std::string::npos) << "the flag wins: " << from_flag.err;
  RunResult via_env = RunProcess({DELAYQ_BIN, "serve", "--data", dir.Sub("d")}, {{"DELAYQ_CONFIG", file}});
  EXPECT_NE(via_env.err.find("0.0.0.0:1"), std::string::npos) << "DELAYQ_CONFIG names the file: " << via_env.err;

  const std::pair<std::string, std::string> bad[] = {
      {"max-queue = 5\n", R"(delayq.toml:1:1: unknown key "max-queue" (did you mean "max-queues"?))"},
      {"\n\nmax-queues = \"many\"\n", "delayq.toml:3:14: max-queues takes a number (max-queues = 100), not a string"},
      {"max-queues = \"100\"\n", "max-queues takes a number"},
      {"max-queues = 1.5\n", "max-queues takes a whole number, not 1.5"},
      {"max-queues = -1\n", "(set by " + file + ":1:1: max-queues)"},
      {"auth-token = 1234567890123\n", "auth-token takes text: write it in quotes"},
      {"auth-token = \"SECRET\\u0000X\"\n", "auth-token holds a NUL character"},
      {"auth-token = \"two words\"\n", "the bearer token has a character no client can send at position 4 (a space)"},
      {"tls-client-ca = \"\"\n", "--tls-client-ca: is given empty (DELAYQ_TLS_CLIENT_CA or the config file)"},
      {"auth-token = \"\"\n", "--auth-token: is given empty"},
      {"max-queues = 5\nlisten = \n", "delayq.toml:2:"},
      {"[serve]\nlisten = \"127.0.0.1:0\"\n", "[serve] is a table"},
      {"listen = 1979-05-27\n", "listen is a date"},
      {"config = \"other.toml\"\n", R"(unknown key "config")"},
      {std::string("listen = \"\0\"\n", 13), "delayq.toml:1:"},
      // A switch takes a TOML boolean only; a value-taking option never does.
      {"access-log = \"yes\"\n",
       "delayq.toml:1:14: access-log is a switch: write access-log = true or access-log = "
       "false (not a string)"},
      {"access-log = 5\n", "access-log is a switch"},
      {"access-log = \"false\"\n", "access-log is a switch"},
      {"max-queues = true\n", "max-queues takes a value (delayq serve --help), not true or false"},
  };
  for (const auto& [content, mention] : bad) {
    std::ofstream(file, std::ios::trunc) << content;
    RunResult r = RunProcess(serve);
    EXPECT_EQ(r.exit_code, 2) << content << ": " << r.err;
    EXPECT_NE(r.err.find(mention), std::string::npos) << content << ": " << r.err;
  }
  RunResult missing = RunProcess({DELAYQ_BIN, "serve", "--config", dir.Sub("nope.toml")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.toml"), std::string::npos) << missing.err;
}

// --log-format json: every line of the server's log is one JSON object with a UTC time; the
// access log has one line per answered request; a job going dead is a warning; --log-level
// filters (and DELAYQ_* variables set serve's flags).
TEST(CliLogs, JsonLinesAccessLogDeadWarningAndLevels) {
  ServerProcess server({"--log-format", "json", "--access-log"});
  auto client = server.NewClient();
  ASSERT_TRUE(client->SetConfig("logs", QueueConfig{.max_attempts = 1}).ok());
  EnqueueRequest job;
  job.payload = "1";
  ASSERT_TRUE(client->Enqueue("logs", job).ok());
  auto got = client->Reserve("logs", {.max = 1});
  ASSERT_TRUE(got.ok() && got->size() == 1);
  ASSERT_EQ(client->Nack("logs", {(*got)[0].receipt, std::nullopt, "quote \" and\nnewline", false})->state,
            JobState::kDead);
  EXPECT_EQ(client->Get("logs", JobRef::ById("01JDQ8Z3K6T6V3W1C9X2N4M5PQ")).status().code(), Code::kNotFound);
  ASSERT_EQ(server.Terminate(), 0);
  bool access = false, dead = false;
  std::istringstream lines(server.log());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("delayq serving", 0) == 0 || line.rfind("try:", 0) == 0 || line.rfind("      curl", 0) == 0)
      continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not a JSON line: " << line;
    ASSERT_TRUE(j.contains("time") && j.contains("level") && j.contains("message")) << line;
    EXPECT_EQ(j["time"].get<std::string>().back(), 'Z') << "UTC: " << line;
    const std::string m = j["message"];
    access = access || m.find("GET /v1/queues/logs/jobs/01JDQ8Z3K6T6V3W1C9X2N4M5PQ 404") != std::string::npos;
    if (m.find("went dead after 1 attempt") != std::string::npos) {
      dead = true;
      EXPECT_EQ(j["level"], "warning") << line;
      EXPECT_NE(m.find("quote \" and\nnewline"), std::string::npos) << "escaped, not broken: " << line;
    }
  }
  EXPECT_TRUE(access) << server.log();
  EXPECT_TRUE(dead) << server.log();

  // DELAYQ_LOG_LEVEL=error: the info lines are gone.
  TempDir dir;
  RunResult quiet = RunProcess({DELAYQ_BIN, "serve", "--listen", "127.0.0.1:1", "--data", dir.Sub("d")},
                               {{"DELAYQ_LOG_LEVEL", "error"}, {"DELAYQ_MAX_QUEUES", "not-a-number"}});
  EXPECT_EQ(quiet.exit_code, 2) << "DELAYQ_MAX_QUEUES is serve's --max-queues: " << quiet.err;
  EXPECT_NE(quiet.err.find("max-queues"), std::string::npos) << quiet.err;
}

// A real server reads W3C Trace Context from an enqueue's headers (two tracestate lines read as
// one), gives it to the job, and its access log names the trace.
TEST(CliLogs, TheTraceparentHeaderGoesOnTheJobAndTheAccessLogNamesTheTrace) {
  ServerProcess server({"--access-log"});
  // Enqueues {"payload": 1} with these header lines; the job as the server then shows it.
  auto enqueue_with = [&](const std::string& lines) {
    const std::string body = R"({"payload": 1})";
    const std::string answer = RawExchange(
        server.port(), "POST /v1/queues/traced/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                           lines + "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                           body);
    EXPECT_NE(answer.find("201 Created"), std::string::npos) << answer;
    const auto id = nlohmann::json::parse(answer.substr(answer.find("\r\n\r\n") + 4))["id"].get<std::string>();
    return server.NewClient()->Get("traced", JobRef::ById(id)).value();
  };
  const Job job = enqueue_with(
      "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
      "tracestate: rojo=1\r\ntracestate: congo=2\r\n");
  EXPECT_EQ(TraceParentOf(job.headers), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_EQ(TraceStateOf(job.headers), "rojo=1,congo=2");
  // Two traceparent lines: W3C reads neither.
  const Job twice = enqueue_with(
      "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
      "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n");
  EXPECT_EQ(TraceParentOf(twice.headers), "");
  ASSERT_EQ(server.Terminate(), 0);
  EXPECT_NE(server.log().find("POST /v1/queues/traced/jobs 201"), std::string::npos) << server.log();
  EXPECT_NE(server.log().find("ms trace=4bf92f3577b34da6a3ce929d0e0e4736"), std::string::npos) << server.log();
}

// `delayq completion bash` completes commands, nested commands and each command's options, and
// skips the values of options (`--server URL`); zsh gets the same through bashcompinit.
TEST(CliCompletion, BashCompletesCommandsNestedCommandsAndOptions) {
  RunResult script = RunProcess({DELAYQ_BIN, "completion", "bash"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  TempDir dir;
  const std::string file = dir.Sub("delayq.bash");
  std::ofstream(file) << script.out;
  auto complete = [&](const std::string& words, int cword) {
    RunResult r = RunProcess({"bash", "-c",
                              "source " + file + "; COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
                                  "; _delayq; echo \"${COMPREPLY[*]}\""});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  };
  EXPECT_EQ(complete("delayq res", 1), "reschedule resume reserve");  // in the order of --help
  EXPECT_EQ(complete("delayq --server http://x:1 enq", 3), "enqueue");
  EXPECT_EQ(complete("delayq dead l", 2), "list");
  EXPECT_EQ(complete("delayq enqueue q p --del", 4), "--delay");
  EXPECT_EQ(complete("delayq dead list q --lim", 4), "--limit");
  EXPECT_EQ(complete("delayq work q -- ./x --del", 5), "") << "after --, the words are the handler's";
  RunResult zsh = RunProcess({DELAYQ_BIN, "completion", "zsh"});
  EXPECT_EQ(zsh.out.rfind("autoload -U +X bashcompinit && bashcompinit\n", 0), 0u);
  EXPECT_EQ(RunProcess({DELAYQ_BIN, "completion", "fish"}).exit_code, 2);
}

// `delayq config` sets and shows flow control; a bad limit is refused with exit code 2 and
// changes nothing.
TEST_F(CliTest, ConfigSetsAndShowsFlowControl) {
  RunResult set = Cli({"config", "limited", "--rate", "2.5", "--burst", "10", "--max-reserved", "20"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("rate limit      2.5 deliveries/s, burst 10"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("max reserved    20 jobs leased at once"), std::string::npos) << set.out;
  RunResult json = Cli({"--json", "config", "limited"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["rate_per_s"], 2.5);
  EXPECT_EQ(j["burst"], 10);
  EXPECT_EQ(j["max_reserved"], 20);
  RunResult bad = Cli({"config", "limited", "--rate", "-1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("rate_per_s is -1"), std::string::npos) << bad.err;
  EXPECT_EQ(nlohmann::json::parse(Cli({"--json", "config", "limited"}).out)["rate_per_s"], 2.5);
  RunResult off = Cli({"config", "limited", "--rate", "0", "--max-reserved", "0"});
  EXPECT_NE(off.out.find("rate limit      none"), std::string::npos) << off.out;
}

TEST_F(CliTest, BenchLeadSetsWhenTheWindowStarts) {
  const std::vector<std::string> burst = {"--json", "bench",   "--no-progress", "--jobs",      "2000", "--window",
                                          "300ms",  "--grace", "60s",           "--consumers", "2",    "--producers",
                                          "2"};  // ends when all came
  auto with = [&](const std::string& lead) {
    std::vector<std::string> args = burst;
    args.insert(args.end(), {"--lead", lead, "--queue", "lead-" + lead});
    return Cli(args);
  };
  RunResult now = with("0ms");
  ASSERT_EQ(now.exit_code, 0) << now.err;
  EXPECT_NE(now.out.find(R"("enqueue_finished_before_window":false)"), std::string::npos) << now.out;
  EXPECT_NE(now.out.find(R"("delivered":2000,"lost":0)"), std::string::npos) << now.out;
  RunResult ahead = with("5s");
  ASSERT_EQ(ahead.exit_code, 0) << ahead.err;
  EXPECT_NE(ahead.out.find(R"("enqueue_finished_before_window":true)"), std::string::npos) << ahead.out;
  RunResult bad = with("0");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.err.find("units ms, s, m, h, d"), std::string::npos) << bad.err;
}

// `delayq work` runs handlers without the token in their environment.
TEST(CliWork, HandlersDoNotSeeTheToken) {
  ServerProcess server({"--auth-token", "w0rker-token"});
  TempDir dir;
  const std::string script = dir.Sub("handler.sh"), log = dir.Sub("env.log");
  std::ofstream(script) << "#!/bin/sh\ncat >/dev/null\necho \"token=${DELAYQ_AUTH_TOKEN:-unset} id=$DELAYQ_JOB_ID\" >> "
                        << log << "\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  auto client = server.NewClient({.auth_token = "w0rker-token"});
  ASSERT_TRUE(client->Enqueue("env", {.payload = "1"}).ok());
  Child worker({DELAYQ_BIN, "--server", server.url(), "work", "env", "--wait", "1s", "--", script},
               dir.Sub("worker.log"), {{"DELAYQ_AUTH_TOKEN", "w0rker-token"}});
  for (int i = 0; i < 1000; ++i) {
    auto s = client->Stats("env");
    if (s.ok() && s->counters.acked == 1) break;
    (void)client->Reserve("env-tick", {.max = 1, .wait_ms = 20});  // a 20 ms server-side wait
  }
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(), 0) << ReadFile(dir.Sub("worker.log"));
  const std::string seen = ReadFile(log);
  EXPECT_NE(seen.find("token=unset"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("w0rker-token"), std::string::npos) << seen;
}

TEST_F(CliTest, WorkAcksOnExitZeroAndNacksOtherwise) {
  TempDir dir;
  const std::string script = dir.Sub("handler.sh"), log = dir.Sub("handled.log");
  std::ofstream(script) << "#!/bin/sh\npayload=$(cat)\necho \"$DELAYQ_ATTEMPT $payload\" >> " << log
                        << "\ncase \"$payload\" in *fail*) echo \"no: $payload\" >&2; exit 7;; esac\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  ASSERT_EQ(Cli({"config", "w", "--max-attempts", "2", "--backoff-base", "100ms", "--jitter", "0"}).exit_code, 0);
  ASSERT_EQ(Cli({"enqueue", "w", R"({"ok":1})"}).exit_code, 0);
  ASSERT_EQ(Cli({"enqueue", "w", R"("please fail")"}).exit_code, 0);

  Child worker({DELAYQ_BIN, "--server", server_.url(), "work", "w", "--concurrency", "2", "--wait", "1s", "--", script},
               dir.Sub("worker.log"));
  auto client = server_.NewClient();
  // Done when the good job is acked and the bad one is dead (a long poll on the dead count).
  for (int i = 0; i < 1000; ++i) {
    auto s = client->Stats("w");
    if (s.ok() && s->counters.acked == 1 && s->dead == 1) break;
    (void)client->Reserve("w-tick", {.max = 1, .wait_ms = 20});  // a 20 ms server-side wait
  }
  worker.Signal(SIGTERM);
  EXPECT_EQ(worker.Wait(), 0) << ReadFile(dir.Sub("worker.log"));
  auto s = client->Stats("w");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->counters.acked, 1u);
  EXPECT_EQ(s->counters.nacked, 2u);
  EXPECT_EQ(s->dead, 1);
  const std::string handled = ReadFile(log);
  EXPECT_NE(handled.find("1 {\"ok\":1}"), std::string::npos) << handled;
  EXPECT_NE(handled.find("2 \"please fail\""), std::string::npos) << handled;

  RunResult dead = Cli({"dead", "list", "w"});
  EXPECT_NE(dead.out.find("exit status 7: no: \"please fail\""), std::string::npos) << dead.out;
  RunResult replay = Cli({"dead", "replay", "w"});
  EXPECT_EQ(replay.exit_code, 0);
  EXPECT_NE(replay.out.find("replayed 1"), std::string::npos) << replay.out;
  // The replayed job is due now; the scheduler hands it to the ready set on its next turn.
  auto after = client->Stats("w");
  for (int i = 0; i < 10'000 && after.ok() && after->ready == 0; ++i) after = client->Stats("w");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->dead, 0);
  EXPECT_EQ(after->ready, 1);
  EXPECT_EQ(Cli({"dead", "purge", "w"}, "").exit_code, 2) << "purge without --yes and no terminal";
}

}  // namespace
}  // namespace delayq::testing
