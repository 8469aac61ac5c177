#include "core/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace delayq {
namespace {

// getrandom costs a system call; a receipt needs 16 bytes. Each thread keeps a small buffer of
// kernel output and hands it out once (the bytes are still the CSPRNG's; delayq never forks
// without exec, so no two processes share a buffer).
struct Pool {
  unsigned char bytes[512];
  size_t used = sizeof bytes;
};

void Fill(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    const ssize_t got = ::getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "delayq: getrandom failed: %s\n", std::strerror(errno));
      std::abort();
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

}  // namespace

void SecureRandomBytes(void* out, size_t n) {
  thread_local Pool pool;
  auto* p = static_cast<unsigned char*>(out);
  if (n > sizeof pool.bytes / 4) {
    Fill(p, n);
    return;
  }
  if (sizeof pool.bytes - pool.used < n) {
    Fill(pool.bytes, sizeof pool.bytes);
    pool.used = 0;
  }
  std::memcpy(p, pool.bytes + pool.used, n);
  std::memset(pool.bytes + pool.used, 0, n);  // handed out once
  pool.used += n;
}

}  // namespace delayq
