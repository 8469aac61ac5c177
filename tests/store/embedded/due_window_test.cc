#include "store/embedded/due_window.h"

#include <gtest/gtest.h>

#include <algorithm>
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
      EXPECT_EQ(w.PopFront().key, *model.begin());
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

// The engine reads the front after every insert, so the first bucket is sorted at once and
// keeps taking inserts: in due order (they extend the sorted run) and out of it (the heap
// beside it), with erases, finds and pops among them. It must still act as an ordered set.
TEST(DueWindow, MatchesAnOrderedSetWhileTheFirstBucketKeepsTakingInserts) {
  for (bool mostly_in_order : {true, false}) {
    std::mt19937_64 rng(mostly_in_order ? 7 : 8);
    DueWindow w;
    std::set<DueKey> model;
    int64_t next_due = 0;
    uint64_t next_id = 1;
    for (int step = 0; step < 30000; ++step) {
      const int op = static_cast<int>(rng() % 12);
      if (op < 6 || model.empty()) {
        int64_t due = static_cast<int64_t>(rng() % 4000);  // one bucket
        if (mostly_in_order && rng() % 10 != 0) due = next_due = std::min<int64_t>(next_due + 1, 4095);
        DueKey k{due, IdOf(next_id++)};
        w.Insert(k, static_cast<int32_t>(step));
        model.insert(k);
        ASSERT_EQ(w.Front(), *model.begin());
      } else if (op < 8) {
        auto it = model.begin();
        std::advance(it, static_cast<long>(rng() % model.size()));
        DueKey gone = *it;
        ASSERT_TRUE(w.Find(gone).has_value());
        ASSERT_TRUE(w.Erase(gone));
        model.erase(it);
        ASSERT_FALSE(w.Find(gone).has_value());
        ASSERT_FALSE(w.Erase(gone));
      } else if (op < 11) {
        ASSERT_EQ(w.PopFront().key, *model.begin());
        model.erase(model.begin());
      } else {
        EXPECT_EQ(w.CountDueBy(2000),
                  static_cast<int64_t>(
                      std::count_if(model.begin(), model.end(), [](const DueKey& k) { return k.due_ms <= 2000; })));
      }
      ASSERT_EQ(w.size(), model.size());
    }
    while (!model.empty()) {
      ASSERT_EQ(w.PopFront().key, *model.begin());
      model.erase(model.begin());
    }
    EXPECT_TRUE(w.empty());
  }
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
