// make_engine_fixture DIR: writes the upgrade fixture (upgrade_fixture.h) with this build into
// DIR/data, and the job ids into DIR/ids. Run once per release whose data format later releases
// must read: build/tests/make_engine_fixture tests/fixtures/embedded-<version>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "delayq/clock.h"
#include "delayq/engine.h"
#include "store/embedded/upgrade_fixture.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_engine_fixture DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  delayq::EngineOptions options;
  options.path = (dir / "data").string();
  options.durability = delayq::Durability::kSync;
  options.clock = std::make_shared<delayq::ManualClock>(delayq::testing::kFixtureStartMs * 1000);
  auto engine = delayq::Engine::Open(options);
  if (!engine.ok()) {
    std::cerr << engine.status().ToString() << "\n";
    return 1;
  }
  const auto ids = delayq::testing::WriteFixture(**engine);
  engine->reset();
  std::ofstream(dir / "ids") << ids.scheduled << "\n"
                             << ids.ready << "\n"
                             << ids.reserved << "\n"
                             << ids.dead << "\n"
                             << ids.done << "\n";
  std::filesystem::remove(dir / "data" / "LOG");  // RocksDB's info log: not data
  return 0;
}
