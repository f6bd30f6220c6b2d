#pragma once

// Whether `fd` becomes readable within `timeout_ms` (0: now): the event descriptors the
// membership tests watch.

#include <poll.h>

namespace acc::launcher {

inline bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

}  // namespace acc::launcher
