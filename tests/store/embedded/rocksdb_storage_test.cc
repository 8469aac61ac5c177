// The RocksDB storage under the engine, on what the engine relies on directly: MultiGet
// (batched since issue 16) answers every key, in the order asked, found or not, from the
// memtables and from SST files alike.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/embedded/storage.h"
#include "support/temp_dir.h"

namespace delayq {
namespace {

std::string Key(int i) { return "k" + std::to_string(100000 + i); }
std::string Value(int i) { return std::string(static_cast<size_t>(500 + i % 700), static_cast<char>('a' + i % 26)); }

TEST(RocksDbStorage, MultiGetAnswersEveryKeyInTheOrderAskedFromMemtablesAndFiles) {
  testing::TempDir dir;
  auto opened = OpenRocksDbStorage({dir.path(), 1 << 20, 1 << 20});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Storage& s = **opened;
  // ~20 MB: more than an 8 MB memtable holds, so part of it is flushed to SST files.
  constexpr int kKeys = 24'000;
  for (int i = 0; i < kKeys; i += 1000) {
    auto batch = s.NewBatch();
    for (int j = i; j < i + 1000; ++j) batch->Put(Cf::kJobs, Key(j), Value(j));
    ASSERT_TRUE(s.Write(*batch).ok());
  }
  auto drop = s.NewBatch();
  drop->Delete(Cf::kJobs, Key(7));
  ASSERT_TRUE(s.Write(*drop).ok());
  auto other = s.NewBatch();
  other->Put(Cf::kKeys, Key(kKeys + 9), "only in the keys family");
  ASSERT_TRUE(s.Write(*other).ok());
  // Out of order: the last and first written, one deleted, one asked twice, two never written,
  // and one that exists in another family only.
  const std::vector<int> asked = {kKeys - 1, 0, 7, 12'345, -5, 500, 12'345, kKeys + 3, kKeys + 9};
  std::vector<std::string> keys;
  for (int i : asked) keys.push_back(Key(i));

  std::vector<std::string> values(3, "stale");  // what the caller's vector held goes
  std::vector<Status> st = s.MultiGet(Cf::kJobs, keys, &values);
  ASSERT_EQ(st.size(), keys.size());
  ASSERT_EQ(values.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int k = asked[i];
    const bool present = k >= 0 && k < kKeys && k != 7;
    if (present) {
      ASSERT_TRUE(st[i].ok()) << keys[i] << ": " << st[i].ToString();
      EXPECT_EQ(values[i], Value(k)) << keys[i];
    } else {
      EXPECT_EQ(st[i].code(), Code::kNotFound) << keys[i];
      EXPECT_TRUE(values[i].empty()) << keys[i];
    }
  }
  EXPECT_TRUE(s.MultiGet(Cf::kJobs, {}, &values).empty());
  EXPECT_TRUE(values.empty());
}

}  // namespace
}  // namespace delayq
