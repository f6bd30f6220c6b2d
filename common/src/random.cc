#include "acc/common/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "acc/common/error.h"

namespace acc {

std::uint64_t random_u64() {
  std::uint64_t value = 0;
  // getrandom returns up to 256 bytes whole once the pool is initialised; a signal can only
  // interrupt it before it has copied anything.
  for (;;) {
    const ssize_t n = ::getrandom(&value, sizeof value, 0);
    if (n == static_cast<ssize_t>(sizeof value)) return value;
    ACC_CHECK(n < 0 && errno == EINTR, SystemError,
              "getrandom: ", n < 0 ? std::strerror(errno) : "short read");
  }
}

}  // namespace acc
