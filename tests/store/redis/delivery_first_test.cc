// Deliveries before enqueues on one Redis (store/redis/delivery_first.h): the gate alone, then
// wired into the store, with Redis holding a delivery script in flight (CLIENT PAUSE WRITE).
#include "store/redis/delivery_first.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "store/redis/redis_fixture.h"
#include "store/redis/redis_queue.h"

namespace delayq::testing {
namespace {

using namespace std::chrono_literals;

// Polls `done` (a condition another thread makes true) for up to 20 s.
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(DeliveryFirst, AnEnqueueWaitsUntilNoDeliveryIsInFlight) {
  redis::DeliveryFirst gate(60s);
  gate.BeforeEnqueue();  // nothing in flight: no wait
  EXPECT_EQ(gate.held(), 0u);
  std::atomic<bool> through{false};
  std::thread enqueue;
  {
    redis::DeliveryFirst::Delivery first(gate);
    redis::DeliveryFirst::Delivery second(gate);  // two deliveries: the enqueue waits for both
    enqueue = std::thread([&] {
      gate.BeforeEnqueue();
      through = true;
    });
    ASSERT_TRUE(Eventually([&] { return gate.held() == 1; }));
    EXPECT_FALSE(through.load());  // held() counts it before it waits; `through` comes after
  }
  enqueue.join();
  EXPECT_TRUE(through.load());
}

TEST(DeliveryFirst, AnEnqueueIsHeldAtMostItsMaximumAndNeverWithZero) {
  redis::DeliveryFirst gate(30ms);
  redis::DeliveryFirst::Delivery forever(gate);
  const auto start = std::chrono::steady_clock::now();
  gate.BeforeEnqueue();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  EXPECT_EQ(gate.held(), 1u);

  redis::DeliveryFirst off(0us);
  redis::DeliveryFirst::Delivery also(off);
  off.BeforeEnqueue();
  EXPECT_EQ(off.held(), 0u);
}

Result<redis::Value> Command(const std::string& url, const std::vector<std::string>& argv) {
  auto parsed = redis::RedisUrl::Parse(url);
  if (!parsed.ok()) return parsed.status();
  auto client = redis::RedisClient::Connect(*parsed);
  if (!client.ok()) return client.status();
  return (*client)->Call("", argv);
}

int64_t BlockedClients(const std::string& url) {
  auto info = Command(url, {"INFO", "clients"});
  if (!info.ok()) return -1;
  const std::string& text = info->str;
  const auto at = text.find("blocked_clients:");
  return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + 16);
}

// The store: while Redis holds a reserve script (writes are paused), an enqueue of the same
// process waits in delayq rather than queueing its script behind it; both succeed once Redis
// runs scripts again.
TEST(DeliveryFirst, TheRedisStoreHoldsItsEnqueuesWhileAReserveIsInFlight) {
  RedisServer redis;
  redis::RedisQueueOptions o;
  o.url = redis.url();
  o.delivery_first_max_wait_us = 60'000'000;
  o.command_timeout_ms = 60'000;  // Redis holds the reserve while paused, on a loaded machine too
  auto store = redis::RedisQueue::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EnqueueRequest later;
  later.payload = "later";
  later.when.delay_ms = 3'600'000;
  ASSERT_TRUE((*store)->Enqueue("q", later).ok());  // the queue exists: a reserve runs its script

  ASSERT_TRUE(Command(redis.url(), {"CLIENT", "PAUSE", "60000", "WRITE"}).ok());
  Result<std::vector<Delivery>> reserved = Status::Internal("not run");
  Result<EnqueueResult> enqueued = Status::Internal("not run");
  std::thread reserve([&] { reserved = (*store)->Reserve("q", ReserveRequest{}); });
  // Another client of the store (its scheduler's bookkeeping) can be the one Redis holds first,
  // so wait for this reserve itself to be in flight, then for Redis to hold it.
  const bool reserve_in_redis = Eventually([&] { return (*store)->deliveries_in_flight() >= 1; }) &&
                                Eventually([&] { return BlockedClients(redis.url()) >= 1; });
  EnqueueRequest now;
  now.payload = "now";
  std::thread enqueue([&] { enqueued = (*store)->Enqueue("q", now); });
  const bool enqueue_held = Eventually([&] { return (*store)->enqueues_held_for_deliveries() >= 1; });
  EXPECT_TRUE(Command(redis.url(), {"CLIENT", "UNPAUSE"}).ok());  // before any assertion can return
  reserve.join();
  enqueue.join();
  EXPECT_TRUE(reserve_in_redis) << "the reserve script never reached Redis";
  EXPECT_TRUE(enqueue_held) << "the enqueue was not held back while the reserve was in flight";
  EXPECT_TRUE(reserved.ok()) << reserved.status().ToString();
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  auto job = (*store)->Get("q", JobRef::ById(enqueued->id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->payload, "now");
}

}  // namespace
}  // namespace delayq::testing
