#include "core/ready_order.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace delayq {
namespace {

ReadyKey Key(int64_t due_ms, uint8_t n) {
  ReadyKey k{due_ms, {}};
  k.id.bytes[15] = n;
  return k;
}

// Takes every job there is, in order, and says which group each came from.
std::string Drain(ReadyOrder& order, int64_t now_ms, const ReadyOrderRules& rules = {}) {
  std::string out;
  while (auto pick = order.Peek(now_ms, rules)) {
    out += pick->group;
    order.Take(*pick);
  }
  return out;
}

TEST(ReadyOrder, ATenantWithTenJobsIsServedBetweenTheJobsOfOneWithAHundredThousand) {
  ReadyOrder order;
  for (int i = 0; i < 100'000; ++i) order.Add("big", 0, Key(i, 0));
  for (int i = 0; i < 10; ++i) order.Add("small", 0, Key(1'000'000 + i, 1));
  int taken = 0, small = 0;
  while (small < 10) {
    auto pick = order.Peek(2'000'000, {});
    ASSERT_TRUE(pick.has_value());
    small += pick->group == "small";
    order.Take(*pick);
    ++taken;
  }
  // "small" joined after "big", so "big" goes first and then they alternate.
  EXPECT_EQ(taken, 20);
  EXPECT_EQ(order.size(), 100'000u - 10);
}

TEST(ReadyOrder, GroupsTakeTurnsAndANewGroupJoinsAtTheBack) {
  ReadyOrder order;
  for (uint8_t i = 0; i < 3; ++i) order.Add("a", 0, Key(i, i));
  order.Add("b", 0, Key(100, 10));
  auto first = order.Peek(1000, {});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->group, "a");
  order.Take(*first);
  order.Add("c", 0, Key(0, 20));  // due earliest, but its group joins behind b and a
  EXPECT_EQ(Drain(order, 1000), "baca") << "a's turn ended before c joined";
}

TEST(ReadyOrder, WithinAGroupHigherPriorityFirstThenEarlierDueThenId) {
  ReadyOrder order;
  order.Add("", 0, Key(1, 1));
  order.Add("", 9, Key(5, 2));
  order.Add("", 3, Key(2, 3));
  order.Add("", 3, Key(2, 4));
  order.Add("", 3, Key(1, 5));
  std::vector<uint8_t> ids;
  while (auto pick = order.Peek(10, {})) {
    ids.push_back(pick->key.id.bytes[15]);
    order.Take(*pick);
  }
  EXPECT_EQ(ids, (std::vector<uint8_t>{2, 5, 3, 4, 1}));
}

TEST(ReadyOrder, ALowPriorityJobGainsALevelForEveryAgingPeriodItHasBeenDue) {
  ReadyOrder order;
  order.Add("", 0, Key(0, 1));     // due at 0, priority 0
  order.Add("", 5, Key(4900, 2));  // due later, priority 5 (aging too: 5 until 5900)
  const ReadyOrderRules aging{.aging_ms = 1000};
  EXPECT_EQ(order.Peek(4999, aging)->key.id.bytes[15], 2) << "priority 4 (aged) < 5";
  EXPECT_EQ(order.Peek(5000, aging)->key.id.bytes[15], 1) << "aged to 5: a tie, and it is due first";
  EXPECT_EQ(order.Peek(1'000'000, {})->key.id.bytes[15], 2) << "aging 0: strict priorities";
  // Aging stops at 9, so a priority-9 job due first still goes first; ages near INT64_MAX do not
  // overflow.
  order.Add("", 9, Key(-5, 3));
  EXPECT_EQ(order.Peek(INT64_MAX, {.aging_ms = 1})->key.id.bytes[15], 3);
}

TEST(ReadyOrder, AGroupAtItsCapIsSkippedUntilOneOfItsLeasesEnds) {
  ReadyOrder order;
  for (uint8_t i = 0; i < 5; ++i) order.Add("a", 0, Key(i, i));
  order.Add("b", 0, Key(10, 10));
  std::map<std::string, int, std::less<>> reserved;
  const ReadyOrderRules cap{.full = [&](std::string_view g) { return reserved.find(g)->second >= 2; }};
  reserved["a"] = reserved["b"] = 0;
  std::string taken;
  while (auto pick = order.Peek(100, cap)) {
    taken += pick->group;
    ++reserved[pick->group];
    order.Take(*pick);
  }
  EXPECT_EQ(taken, "aba") << "then a has 2 reserved, and b nothing ready";
  EXPECT_EQ(order.size(), 3u);
  --reserved["a"];  // one of a's leases ended
  auto next = order.Peek(100, cap);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->group, "a");
  EXPECT_TRUE(order.Peek(100, {}).has_value()) << "no cap: a's jobs go";
}

TEST(ReadyOrder, GroupsWithNothingReadyAreForgotten) {
  ReadyOrder order;
  order.Add("a", 1, Key(1, 1));
  order.Add("b", 2, Key(1, 2));
  EXPECT_FALSE(order.Remove("a", 2, Key(1, 1))) << "wrong priority: not that job";
  EXPECT_FALSE(order.Remove("c", 1, Key(1, 1)));
  EXPECT_TRUE(order.Remove("a", 1, Key(1, 1)));
  EXPECT_EQ(order.group_count(), 1u);
  auto pick = order.Peek(5, {});
  ASSERT_TRUE(pick);
  order.Take(*pick);
  EXPECT_EQ(order.group_count(), 0u);
  EXPECT_TRUE(order.empty());
  order.Take(*pick);  // taking it again changes nothing
  EXPECT_TRUE(order.empty());
}

TEST(ReadyOrder, TopGroupsAreTheMostReadyFirst) {
  ReadyOrder order;
  for (uint8_t i = 0; i < 3; ++i) order.Add("x", 0, Key(i, i));
  order.Add("y", 0, Key(0, 10));
  for (uint8_t i = 0; i < 3; ++i) order.Add("w", 0, Key(i, static_cast<uint8_t>(20 + i)));
  auto top = order.TopGroups(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].group, "w");
  EXPECT_EQ(top[1].group, "x");
  EXPECT_EQ(top[1].ready, 3);
  EXPECT_EQ(order.TopGroups(10).size(), 3u);
}

// Random adds, removes, takes and releases, each pick checked against the rule written out
// plainly (every ready job compared with every other).
TEST(ReadyOrder, EveryPickIsTheOneTheRuleNames) {
  struct Job {
    std::string group;
    int priority;
    ReadyKey key;
  };
  std::mt19937_64 rng(17);
  ReadyOrder order;
  std::vector<Job> ready;
  std::map<std::string, int64_t> reserved;  // the owner's count of leases per group
  std::map<std::string, uint64_t> turn;     // groups with ready jobs -> their turn
  uint64_t next_turn = 0;
  uint8_t next_id = 0;
  const ReadyOrderRules rules{.aging_ms = 50,
                              .full = [&](std::string_view g) { return reserved[std::string(g)] >= 3; }};
  auto count_ready = [&](const std::string& g) {
    return std::count_if(ready.begin(), ready.end(), [&](const Job& j) { return j.group == g; });
  };
  for (int step = 0; step < 20'000; ++step) {
    const int64_t now = step;
    const int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      Job j{std::string(1, static_cast<char>('a' + rng() % 4)), static_cast<int>(rng() % 10),
            Key(now - static_cast<int64_t>(rng() % 400), next_id++)};
      j.key.id.bytes[0] = static_cast<uint8_t>(step >> 8);  // unique ids
      j.key.id.bytes[1] = static_cast<uint8_t>(step);
      if (count_ready(j.group) == 0) turn[j.group] = next_turn++;
      order.Add(j.group, j.priority, j.key);
      ready.push_back(j);
    } else if (op < 6 && !ready.empty()) {
      const size_t i = rng() % ready.size();
      ASSERT_TRUE(order.Remove(ready[i].group, ready[i].priority, ready[i].key));
      const std::string g = ready[i].group;
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(i));
      if (count_ready(g) == 0) turn.erase(g);
    } else if (op < 8) {
      auto it = reserved.begin();
      if (it != reserved.end() && it->second > 0) {
        std::advance(it, static_cast<std::ptrdiff_t>(rng() % reserved.size()));
        if (it->second > 0) {
          --it->second;
        }
      }
    } else {
      // The rule: the allowed group with the oldest turn; in it the best (effective priority,
      // due, id).
      const Job* want = nullptr;
      uint64_t want_turn = UINT64_MAX;
      int want_eff = -1;
      for (const Job& j : ready) {
        if (reserved[j.group] >= 3) continue;
        const int eff = std::min<int64_t>(9, j.priority + std::max<int64_t>(0, now - j.key.due_ms) / rules.aging_ms);
        const uint64_t t = turn.at(j.group);
        if (t < want_turn || (t == want_turn && (eff > want_eff || (eff == want_eff && j.key < want->key)))) {
          want = &j;
          want_turn = t;
          want_eff = eff;
        }
      }
      auto pick = order.Peek(now, rules);
      ASSERT_EQ(pick.has_value(), want != nullptr) << "step " << step;
      if (!want) continue;
      ASSERT_EQ(pick->group, want->group) << "step " << step;
      ASSERT_EQ(pick->key, want->key) << "step " << step;
      order.Take(*pick);
      ++reserved[want->group];
      const std::string g = want->group;
      ready.erase(ready.begin() + (want - ready.data()));
      if (count_ready(g) == 0) {
        turn.erase(g);
      } else {
        turn[g] = next_turn++;
      }
    }
    ASSERT_EQ(order.size(), ready.size());
  }
}

}  // namespace
}  // namespace delayq
