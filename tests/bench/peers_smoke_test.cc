// The peers benchmark's harness (bench/peers/harness, run in full by `make bench-peers`) kept
// from rotting: each workload once against delayq at N = 2 000, and the report built from
// those runs. Asserts what the harness measures (every job delivered once, never early; the
// crash run kills and restarts its consumer and loses nothing), not how fast.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/process.h"
#include "support/temp_dir.h"

namespace delayq::testing {
namespace {

using nlohmann::json;

const std::string kHarness = DELAYQ_PEERS_HARNESS;

json RunWorkload(const std::string& workload, const std::string& consumers, std::string* line) {
  RunResult r = RunProcess({DELAYQ_NODE, kHarness + "/run.js", "--system", "delayq-none", "--workload", workload,
                            "--n", "2000", "--consumers", consumers, "--seconds", "2", "--delayq", DELAYQ_BIN});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  *line = r.out;
  return json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

class PeersHarnessSmoke : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    burst_ = RunWorkload("burst", "4", &lines_);
    std::string more;
    crash_ = RunWorkload("crash", "1", &more);
    lines_ += more;
    memory_ = RunWorkload("memory", "0", &more);
    lines_ += more;
  }
  static inline json burst_, crash_, memory_;
  static inline std::string lines_;
};

TEST_F(PeersHarnessSmoke, BurstDeliversEveryJobOnceAndNeverEarly) {
  ASSERT_TRUE(burst_.is_object()) << lines_;
  EXPECT_EQ(burst_["delivered"], 2000);
  EXPECT_EQ(burst_["lost"], 0);
  EXPECT_EQ(burst_["duplicates"], 0);
  EXPECT_EQ(burst_["early"], 0);
  EXPECT_EQ(burst_["consumers"], 4);
  EXPECT_GT(burst_["enqueue_per_s"].get<double>(), 0);
  EXPECT_GE(burst_["lateness_ms"]["p99"].get<double>(), burst_["lateness_ms"]["p50"].get<double>());
  EXPECT_GE(burst_["lateness_ms"]["max"].get<double>(), burst_["lateness_ms"]["p999"].get<double>());
  EXPECT_EQ(burst_["lateness_cdf_permille"].size(), 1000u);
  EXPECT_GT(burst_["peak_server_bytes"].get<double>(), 0);
}

TEST_F(PeersHarnessSmoke, CrashKillsTheConsumerMidwayAndNothingIsLost) {
  ASSERT_TRUE(crash_.is_object()) << lines_;
  // The consumer was killed after a quarter and before the end, and its successor got the rest.
  EXPECT_GE(crash_["recorded_before_kill"].get<int>(), 500);
  EXPECT_LT(crash_["recorded_before_kill"].get<int>(), 2000);
  EXPECT_EQ(crash_["delivered"], 2000);
  EXPECT_EQ(crash_["lost"], 0);
  EXPECT_EQ(crash_["early"], 0);
}

TEST_F(PeersHarnessSmoke, MemoryReportsBytesPerScheduledJob) {
  ASSERT_TRUE(memory_.is_object()) << lines_;
  EXPECT_EQ(memory_["n"], 2000);
  EXPECT_GT(memory_["enqueue_per_s"].get<double>(), 0);
  EXPECT_TRUE(memory_["bytes_per_job"].is_number());
  EXPECT_GT(memory_["disk_bytes_per_job"].get<double>(), 0);
}

TEST_F(PeersHarnessSmoke, ReportTurnsTheRunsIntoTablesAndPlotData) {
  TempDir dir;
  std::ofstream(dir.Sub("runs.jsonl")) << lines_;
  RunResult r = RunProcess({DELAYQ_NODE, kHarness + "/report.js", dir.Sub("runs.jsonl"), dir.Sub("results"),
                            dir.Sub("plot"), R"({"repeat":1,"date":"today"})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = ReadFile(dir.Sub("results/peers.md"));
  EXPECT_NE(md.find("## Burst: 2 000 jobs due uniformly over 10 s, 4 consumers"), std::string::npos) << md;
  EXPECT_NE(md.find("| delayq, embedded | none (RAM + disk, no fsync) |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Memory: 2 000 jobs"), std::string::npos) << md;
  EXPECT_NE(md.find("## Crash: 2 000 jobs"), std::string::npos) << md;
  json report = json::parse(ReadFile(dir.Sub("results/peers.json")));
  EXPECT_EQ(report["medians"]["burst:4"]["delayq-none"]["delivered"], 2000);
  EXPECT_EQ(report["medians"]["crash:1"]["delayq-none"]["lost"], 0);
  EXPECT_EQ(report["runs"].size(), 3u);
  EXPECT_FALSE(ReadFile(dir.Sub("plot/cdf-delayq-none.dat")).empty());
  EXPECT_FALSE(ReadFile(dir.Sub("plot/memory.dat")).empty());
}

}  // namespace
}  // namespace delayq::testing
