// Unpredictable bits for receipts and ids, from the operating system's CSPRNG (getrandom(2)).
// A client that sees many receipts and ids learns nothing about the next ones (a seeded
// mt19937 gave its state away after 312 outputs). Thread-safe; never blocks once the kernel's
// pool is initialised at boot.
#pragma once

#include <cstddef>
#include <cstdint>

namespace delayq {

// Fills `out` with `n` random bytes. Aborts if the kernel refuses (it cannot, short of ENOSYS):
// handing out predictable receipts instead would be worse than stopping.
void SecureRandomBytes(void* out, size_t n);

inline uint64_t SecureRandom64() {
  uint64_t v;
  SecureRandomBytes(&v, sizeof v);
  return v;
}

}  // namespace delayq
