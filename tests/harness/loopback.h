#pragma once

// Connections to a loopback port, for tests that ask whether something serves there. Header-only,
// for every test binary.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace acc::testing {

// A connection to 127.0.0.1:`port`: its descriptor (the caller closes it), or -1 where nothing
// listens there.
inline int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether something listens on 127.0.0.1:`port` now.
inline bool loopback_listens(int port) {
  const int fd = connect_loopback(port);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

}  // namespace acc::testing
