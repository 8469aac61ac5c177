#include "store/embedded/due_window.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace delayq {
namespace {

Ulid IdOf(uint64_t n) {
  Ulid u;
  for (int i = 0; i < 8; ++i) u.bytes[15 - i] = static_cast<uint8_t>(n >> (8 * i));
  return u;
}

// The window behaves like an ordered set of (due, id) under random inserts, erases and pops.
TEST(DueWindow, MatchesAnOrderedSet) {
  std::mt19937_64 rng(5);
  DueWindow w;
  std::set<DueKey> model;
  for (int step = 0; step < 20000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5 || model.empty()) {
      DueKey k{static_cast<int64_t>(rng() % 200'000), IdOf(rng())};
      w.Insert(k, 1);
      model.insert(k);
    } else if (op < 7) {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % model.size()));
      DueKey gone = *it;
      EXPECT_TRUE(w.Erase(gone));
      model.erase(it);
      EXPECT_FALSE(w.Find(gone).has_value());
    } else if (op < 9) {
      ASSERT_EQ(w.Front(), *model.begin());
      EXPECT_EQ(w.PopFront().first, *model.begin());
      model.erase(model.begin());
    } else {
      EXPECT_FALSE(w.Erase(DueKey{static_cast<int64_t>(rng() % 200'000), IdOf(rng())}));
    }
    ASSERT_EQ(w.size(), model.size());
  }
  int64_t limit = 100'000;
  int64_t expected = 0;
  for (const DueKey& k : model) expected += k.due_ms <= limit;
  EXPECT_EQ(w.CountDueBy(limit), expected);
  for (const DueKey& k : model) ASSERT_TRUE(w.Find(k).has_value());
}

TEST(DueWindow, DropsWholeBuckets) {
  DueWindow w;
  for (int i = 0; i < 10; ++i) w.Insert({int64_t{1} << kDueBucketShift, IdOf(i)}, 0);
  for (int i = 0; i < 5; ++i) w.Insert({int64_t{3} << kDueBucketShift, IdOf(i)}, 0);
  EXPECT_EQ(w.BucketCount(), 2u);
  EXPECT_EQ(w.LastBucket(), 3);
  EXPECT_EQ(w.DropLastBucket(), 5u);
  EXPECT_EQ(w.size(), 10u);
  EXPECT_EQ(w.LastBucket(), 1);
  EXPECT_EQ(w.Front(), (DueKey{int64_t{1} << kDueBucketShift, IdOf(0)}));
}

}  // namespace
}  // namespace delayq
