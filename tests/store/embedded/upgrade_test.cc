// The upgrade path: a data directory written by an earlier release (tests/fixtures/embedded-*,
// made by make_engine_fixture with that release) opens in this one with every job, key, config
// and pause as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "delayq/clock.h"
#include "delayq/engine.h"
#include "store/embedded/storage.h"
#include "store/embedded/upgrade_fixture.h"
#include "support/temp_dir.h"

namespace delayq::testing {
namespace {

class Upgrade : public ::testing::TestWithParam<std::string> {};

TEST_P(Upgrade, ADataDirectoryOfAnEarlierReleaseOpensWithEverythingInIt) {
  const std::filesystem::path fixture = std::filesystem::path(DELAYQ_FIXTURES_DIR) / GetParam();
  TempDir dir;  // opened in a copy: opening may rewrite files
  std::filesystem::copy(fixture / "data", dir.Sub("data"), std::filesystem::copy_options::recursive);
  std::ifstream in(fixture / "ids");
  FixtureIds ids;
  in >> ids.scheduled >> ids.ready >> ids.reserved >> ids.dead >> ids.done;
  ASSERT_EQ(ids.done.size(), 26u) << "ids file of " << fixture;

  EngineOptions options;
  options.path = dir.Sub("data");
  options.durability = Durability::kNone;
  auto clock = std::make_shared<ManualClock>((kFixtureStartMs + 1000) * 1000);  // a second later
  options.clock = clock;
  auto opened = Engine::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Engine& q = **opened;

  auto config = q.GetConfig("orders");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->max_attempts, 3);
  auto scheduled = q.Get("orders", JobRef::ByKey("a"));
  ASSERT_TRUE(scheduled.ok()) << scheduled.status().ToString();
  EXPECT_EQ(scheduled->id, ids.scheduled);
  EXPECT_EQ(scheduled->state, JobState::kScheduled);
  EXPECT_EQ(scheduled->due_at_ms, kFixtureStartMs + 3'600'000);
  EXPECT_EQ(scheduled->payload, R"({"order":1})");
  EXPECT_EQ(scheduled->headers, (Headers{{"v", "2"}}));
  auto ready = q.Get("orders", JobRef::ById(ids.ready));
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->state, JobState::kReady);
  EXPECT_TRUE(ready->binary);
  EXPECT_EQ(ready->payload, std::string("\x00\x01\xff", 3));
  auto reserved = q.Get("orders", JobRef::ById(ids.reserved));
  ASSERT_TRUE(reserved.ok());
  EXPECT_EQ(reserved->state, JobState::kReserved);
  EXPECT_EQ(reserved->lease_deadline_ms, kFixtureStartMs + 600'000);
  auto dead = q.Get("orders", JobRef::ById(ids.dead));
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->state, JobState::kDead);
  EXPECT_EQ(dead->last_error, "boom");
  // The finished job's key is still kept: a retried enqueue is its duplicate.
  EnqueueRequest again;
  again.payload = "5";
  again.key = "e";
  auto dup = q.Enqueue("orders", again);
  ASSERT_TRUE(dup.ok()) << dup.status().ToString();
  EXPECT_TRUE(dup->duplicate);
  EXPECT_EQ(dup->id, ids.done);
  auto held = q.Stats("held");
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->paused);
  EXPECT_EQ(held->ready, 1);
  // And it works on: the reserved job comes back when its lease runs out, the ready one is taken.
  clock->AdvanceMs(600'000);
  auto got = q.Reserve("orders", {.max = 10});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 2u);

  // Old and new rows side by side (the release's jobs have their records in `jobs`, new ones
  // are one row: store/embedded/keys.h), across a restart, until every job is done.
  auto fresh = q.Enqueue("orders", EnqueueRequest{.payload = "7"});
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(q.Ack("orders", (*got)[0].receipt).ok());
  opened->reset();
  opened = Engine::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Engine& reopened = **opened;
  EXPECT_EQ(reopened.Get("orders", JobRef::ById(fresh->id))->payload, "7");
  EXPECT_EQ(reopened.Get("orders", JobRef::ByKey("a"))->payload, R"({"order":1})");
  ASSERT_TRUE(reopened.Ack("orders", (*got)[1].receipt).ok()) << "a receipt from before the restart";
  auto replayed = reopened.ReplayDead("orders", std::vector<std::string>{ids.dead});
  ASSERT_TRUE(replayed.ok());
  EXPECT_EQ(*replayed, 1);
  ASSERT_TRUE(reopened.Cancel("orders", JobRef::ByKey("a")).ok());
  ASSERT_TRUE(reopened.Resume("held").ok());
  for (const char* queue : {"orders", "held"}) {
    auto rest = reopened.Reserve(queue, {.max = 10});
    ASSERT_TRUE(rest.ok());
    for (const Delivery& d : *rest) ASSERT_TRUE(reopened.Ack(queue, d.receipt).ok());
  }
  for (const char* queue : {"orders", "held"}) {
    auto stats = reopened.Stats(queue);
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->scheduled + stats->ready + stats->reserved + stats->dead, 0) << queue;
  }
  opened->reset();
  auto storage = OpenRocksDbStorage({options.path});
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  for (Cf cf : {Cf::kJobs, Cf::kDue, Cf::kDead}) {
    auto rows = (*storage)->Scan(cf, "", std::string(64, '\xff'));
    EXPECT_FALSE(rows->Valid()) << CfName(cf) << " still has a row for a job that is done";
  }
}

// One entry per release whose data directory is kept as a fixture.
INSTANTIATE_TEST_SUITE_P(Fixtures, Upgrade, ::testing::Values("embedded-0.2.0"), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
});

}  // namespace
}  // namespace delayq::testing
