// The state the upgrade fixture holds (tests/fixtures/embedded-<version>/), written by
// make_engine_fixture with the release of that version and read back by upgrade_test.cc with the
// current one: a data directory written by a release must open in every later one.
#pragma once

#include <string>

#include "delayq/queue.h"

namespace delayq::testing {

// The manual clock's time when the fixture was written (2026-01-01T00:00:00Z).
inline constexpr int64_t kFixtureStartMs = 1'767'225'600'000;

// The ids of the jobs written, in a file beside the data ("ids": one per line, in this order).
struct FixtureIds {
  std::string scheduled, ready, reserved, dead, done;
};

// Writes every kind of state into `q` at kFixtureStartMs: queue "orders" (config max_attempts 3)
// with a scheduled job (key "a", headers, due in 1 h), a ready binary job, a reserved job (lease
// 10 min), a dead job (last error "boom"), an acked job whose key "e" is kept for a day; and a
// paused queue "held" with one ready job.
inline FixtureIds WriteFixture(Queue& q) {
  FixtureIds ids;
  QueueConfig config;
  config.max_attempts = 3;
  if (!q.SetConfig("orders", config).ok()) throw std::runtime_error("config");
  auto must = [](auto r) {
    if (!r.ok()) throw std::runtime_error(r.status().ToString());
    return *r;
  };
  EnqueueRequest a;
  a.payload = R"({"order":1})";
  a.key = "a";
  a.headers = {{"v", "2"}};
  a.when.delay_ms = 3'600'000;
  ids.scheduled = must(q.Enqueue("orders", a)).id;
  EnqueueRequest done;
  done.payload = "5";
  done.key = "e";
  done.key_ttl_ms = 86'400'000;
  ids.done = must(q.Enqueue("orders", done)).id;
  auto first = must(q.Reserve("orders", {.max = 1}));
  if (first.size() != 1 || !q.Ack("orders", first[0].receipt).ok()) throw std::runtime_error("ack");
  EnqueueRequest dead;
  dead.payload = "4";
  ids.dead = must(q.Enqueue("orders", dead)).id;
  auto d = must(q.Reserve("orders", {.max = 1}));
  if (d.size() != 1 || !q.Nack("orders", {d[0].receipt, std::nullopt, "boom", true}).ok()) {
    throw std::runtime_error("nack");
  }
  EnqueueRequest reserved;
  reserved.payload = "3";
  ids.reserved = must(q.Enqueue("orders", reserved)).id;
  auto r = must(q.Reserve("orders", {.max = 1, .lease_ms = 600'000}));
  if (r.size() != 1) throw std::runtime_error("reserve");
  EnqueueRequest ready;
  ready.payload = std::string("\x00\x01\xff", 3);
  ready.binary = true;
  ids.ready = must(q.Enqueue("orders", ready)).id;
  EnqueueRequest held;
  held.payload = "6";
  must(q.Enqueue("held", held));
  if (!q.Pause("held").ok()) throw std::runtime_error("pause");
  return ids;
}

}  // namespace delayq::testing
