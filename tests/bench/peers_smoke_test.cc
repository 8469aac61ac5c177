// The peers benchmark's harness (bench/peers/harness, run in full by `make bench-peers`) kept
// from rotting: each workload once against delayq at N = 2 000, and the report built from
// those runs. Asserts what the harness measures (every job delivered once, never early; the
// crash run kills and restarts its consumer and loses nothing), not how fast.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/process.h"
#include "support/temp_dir.h"

namespace delayq::testing {
namespace {

using nlohmann::json;

const std::string kHarness = DELAYQ_PEERS_HARNESS;

json RunWorkload(const std::string& system, const std::string& workload, const std::string& consumers,
                 std::string* line) {
  RunResult r = RunProcess({DELAYQ_NODE, kHarness + "/run.js", "--system", system, "--workload", workload, "--n",
                            "2000", "--consumers", consumers, "--seconds", workload == "single" ? "1" : "2",
                            "--connections", "4", "--delayq", DELAYQ_BIN});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  *line = r.out;
  return json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

// ctest runs every test in its own process, so each runs only the workloads it looks at.
class PeersHarnessSmoke : public ::testing::Test {
 protected:
  json Run(const std::string& workload, const std::string& system = "delayq-none") {
    std::string line;
    json j = RunWorkload(system, workload, workload == "burst" ? "4" : "1", &line);
    lines_ += line;
    return j;
  }
  std::string lines_;
};

TEST_F(PeersHarnessSmoke, BurstDeliversEveryJobOnceAndNeverEarly) {
  const json burst = Run("burst");
  ASSERT_TRUE(burst.is_object()) << lines_;
  EXPECT_EQ(burst["delivered"], 2000);
  EXPECT_EQ(burst["lost"], 0);
  EXPECT_EQ(burst["duplicates"], 0);
  EXPECT_EQ(burst["early"], 0);
  EXPECT_EQ(burst["consumers"], 4);
  EXPECT_GT(burst["enqueue_per_s"].get<double>(), 0);
  EXPECT_GE(burst["lateness_ms"]["p99"].get<double>(), burst["lateness_ms"]["p50"].get<double>());
  EXPECT_GE(burst["lateness_ms"]["max"].get<double>(), burst["lateness_ms"]["p999"].get<double>());
  EXPECT_EQ(burst["lateness_cdf_permille"].size(), 1000u);
  EXPECT_GT(burst["peak_server_bytes"].get<double>(), 0);
  // The server's CPU over the burst, per job: some, and not more than the whole run's time
  // (2 000 jobs over ~1 s on at most a few cores: well under 10 ms a job).
  EXPECT_GT(burst["server_cpu_us_per_job"].get<double>(), 0);
  EXPECT_LT(burst["server_cpu_us_per_job"].get<double>(), 10000);
  // The HTTP client that drove delayq is named: undici when npm installed it (make bench-peers),
  // Node's http module in a clean clone (make test installs no npm package for the harness).
  const std::string describe = burst["describe"].get<std::string>();
  EXPECT_TRUE(describe.find("keep-alive from undici ") != std::string::npos ||
              describe.find("keep-alive from node:http") != std::string::npos)
      << describe;
}

TEST_F(PeersHarnessSmoke, BurstOnPushStreamsDeliversEveryJobOnce) {
  const json burst = Run("burst", "delayq-none-stream");
  ASSERT_TRUE(burst.is_object()) << lines_;
  EXPECT_EQ(burst["delivered"], 2000);
  EXPECT_EQ(burst["lost"], 0);
  EXPECT_EQ(burst["duplicates"], 0);
  EXPECT_EQ(burst["early"], 0);
  EXPECT_GT(burst["server_cpu_us_per_job"].get<double>(), 0);
  EXPECT_NE(burst["describe"].get<std::string>().find("push streams"), std::string::npos) << lines_;
}

TEST_F(PeersHarnessSmoke, CrashKillsTheConsumerMidwayAndNothingIsLost) {
  const json crash = Run("crash");
  ASSERT_TRUE(crash.is_object()) << lines_;
  // The consumer was killed after a quarter and before the end, and its successor got the rest.
  EXPECT_GE(crash["recorded_before_kill"].get<int>(), 500);
  EXPECT_LT(crash["recorded_before_kill"].get<int>(), 2000);
  EXPECT_EQ(crash["delivered"], 2000);
  EXPECT_EQ(crash["lost"], 0);
  EXPECT_EQ(crash["early"], 0);
}

TEST_F(PeersHarnessSmoke, MemoryReportsBytesPerScheduledJob) {
  const json memory = Run("memory");
  ASSERT_TRUE(memory.is_object()) << lines_;
  EXPECT_EQ(memory["n"], 2000);
  EXPECT_GT(memory["enqueue_per_s"].get<double>(), 0);
  EXPECT_TRUE(memory["bytes_per_job"].is_number());
  EXPECT_GT(memory["disk_bytes_per_job"].get<double>(), 0);
}

// Single-job requests on delayq's default durability (sync): one request in flight on each of
// 4 connections for 1 s (the harness throws, and exits 1, on any answer but the one job's id).
TEST_F(PeersHarnessSmoke, SingleCountsOneJobPerRequestOnEachConnection) {
  const json single = Run("single", "delayq-sync");
  ASSERT_TRUE(single.is_object()) << lines_;
  EXPECT_EQ(single["workload"], "single");
  EXPECT_EQ(single["connections"], 4);
  EXPECT_GT(single["requests"].get<int>(), 0);
  EXPECT_GT(single["enqueue_per_s"].get<double>(), 0);
  EXPECT_NE(single["describe"].get<std::string>().find("--durability sync"), std::string::npos) << lines_;
}

TEST_F(PeersHarnessSmoke, BadOptionsNameWhatIsExpected) {
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--system", "delayq-none", "--workload", "single", "--connections", "0"}, "expected a count of 1 or more"},
           {{"--system", "delayq-none", "--workload", "singel"}, "expected burst, memory, crash or single"},
           {{"--system", "beanstalkd-binlog-snyc", "--workload", "single"}, "beanstalkd-binlog-sync"},
       }) {
    std::vector<std::string> argv = {DELAYQ_NODE, kHarness + "/run.js"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = RunProcess(argv);
    EXPECT_EQ(r.exit_code, 1) << args[3];
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

TEST_F(PeersHarnessSmoke, ReportTurnsTheRunsIntoTablesAndPlotData) {
  for (const char* workload : {"burst", "crash", "memory"}) ASSERT_TRUE(Run(workload).is_object()) << lines_;
  ASSERT_TRUE(Run("single", "delayq-sync").is_object()) << lines_;
  TempDir dir;
  std::ofstream(dir.Sub("runs.jsonl")) << lines_;
  RunResult r = RunProcess({DELAYQ_NODE, kHarness + "/report.js", dir.Sub("runs.jsonl"), dir.Sub("results"),
                            dir.Sub("plot"), R"({"repeat":1,"date":"today"})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = ReadFile(dir.Sub("results/peers.md"));
  EXPECT_NE(md.find("## Burst: 2 000 jobs due uniformly over 2 s, 4 consumers"), std::string::npos) << md;
  EXPECT_NE(md.find("| delayq, embedded | none (RAM + disk, no fsync) |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Memory: 2 000 jobs"), std::string::npos) << md;
  EXPECT_NE(md.find("## Crash: 2 000 jobs"), std::string::npos) << md;
  json report = json::parse(ReadFile(dir.Sub("results/peers.json")));
  EXPECT_EQ(report["medians"]["burst:4"]["delayq-none"]["delivered"], 2000);
  EXPECT_EQ(report["medians"]["crash:1"]["delayq-none"]["lost"], 0);
  EXPECT_NE(md.find("## Single-job requests: 4 connections"), std::string::npos) << md;
  EXPECT_NE(md.find("| delayq, embedded | fsync before the answer (the default) |"), std::string::npos) << md;
  EXPECT_GT(report["medians"]["single:0"]["delayq-sync"]["enqueue_per_s"].get<double>(), 0);
  EXPECT_EQ(report["runs"].size(), 4u);
  EXPECT_FALSE(ReadFile(dir.Sub("plot/cdf-delayq-none.dat")).empty());
  EXPECT_FALSE(ReadFile(dir.Sub("plot/memory.dat")).empty());
}

}  // namespace
}  // namespace delayq::testing
