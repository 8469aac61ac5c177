// An idempotency key whose job leaves for good (ack, cancel): deleted, or with the job's
// key_ttl_ms kept taken until then (a kept key), so a retried enqueue within that time is still a
// duplicate. The Redis store's twin is the key release in its ack and cancel scripts.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/ulid.h"
#include "store/embedded/storage.h"

namespace delayq {

// Whether the keys entry `value` holds its key at now_ms: a live job's, or a kept key not yet
// free.
bool HoldsKey(std::string_view value, int64_t now_ms);

// Puts into `batch` the release of job `id`'s `key`: deleted, or with key_ttl_ms kept taken until
// now + key_ttl_ms (and up to two kept keys whose time ran out are deleted first, so they cannot
// pile up; a failed read only skips that).
void ReleaseKey(Storage& storage, std::string_view queue, const Ulid& id, std::string_view key, int64_t due_ms,
                int64_t key_ttl_ms, int64_t now_ms, WriteBatch& batch);

}  // namespace delayq
