// Idempotency keys leaving with their job (keys.h: the keys and kept-keys layout).
#include "store/embedded/kept_keys.h"

#include <spdlog/spdlog.h>

#include "core/bytes.h"
#include "store/embedded/keys.h"

namespace delayq {

bool HoldsKey(std::string_view value, int64_t now_ms) {
  KeptKey kept;
  return !DecodeKeptKey(value, &kept) || kept.expiry_ms > now_ms;
}

void ReleaseKey(Storage& storage, std::string_view queue, const Ulid& id, std::string_view key, int64_t due_ms,
                int64_t key_ttl_ms, int64_t now_ms, WriteBatch& batch) {
  const std::string idem = IdemKey(queue, key);
  if (key_ttl_ms <= 0) {
    batch.Delete(Cf::kKeys, idem);
    return;
  }
  // First up to two kept keys whose time ran out (before the new one is written: a sweep never
  // deletes what this batch puts). Each kept key is deleted only if it is still the one its
  // index entry names (the key may have been taken by a new job since).
  std::string end = KeptKeyPrefix();
  PutBigEndian64(&end, static_cast<uint64_t>(now_ms + 1));
  auto cursor = storage.Scan(Cf::kMeta, KeptKeyPrefix(), end);
  for (int n = 0; cursor->Valid() && n < 2; cursor->Next(), ++n) {
    const std::string_view entry = cursor->key();
    const std::string_view rest = entry.substr(KeptKeyPrefix().size() + 8);
    const size_t nul = rest.find('\0');
    const int64_t expiry = static_cast<int64_t>(GetBigEndian64(entry.substr(KeptKeyPrefix().size(), 8)));
    if (nul != std::string_view::npos) {
      const std::string other = IdemKey(rest.substr(0, nul), rest.substr(nul + 1));
      std::string value;
      KeptKey kept;
      if (other != idem && storage.Get(Cf::kKeys, other, &value).ok() && DecodeKeptKey(value, &kept) &&
          kept.expiry_ms == expiry) {
        batch.Delete(Cf::kKeys, other);
      }
    }
    batch.Delete(Cf::kMeta, entry);
  }
  if (!cursor->status().ok()) spdlog::warn("sweeping kept idempotency keys: {}", cursor->status().ToString());
  const int64_t expiry = now_ms + key_ttl_ms;
  batch.Put(Cf::kKeys, idem, EncodeKeptKey({id, due_ms, expiry}));
  batch.Put(Cf::kMeta, KeptKeyIndex(expiry, queue, key), "");
}

}  // namespace delayq
