#include "acc/rendezvous/tcp_connect.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "acc/common/backoff.h"

namespace acc::rendezvous {

using std::chrono::milliseconds;

std::string TcpResolution::error() const {
  return ::gai_strerror(status);
}

TcpResolution resolve_tcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  TcpResolution resolution;
  resolution.status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  for (addrinfo* a = resolution.status == 0 ? found : nullptr; a; a = a->ai_next) {
    TcpAddress address;
    std::memcpy(&address.address, a->ai_addr, a->ai_addrlen);
    address.length = a->ai_addrlen;
    resolution.addresses.push_back(address);
  }
  if (found) ::freeaddrinfo(found);
  return resolution;
}

namespace {

TcpConnection failed(int error, bool timed_out = false) {
  TcpConnection connection;
  connection.error = error;
  connection.timed_out = timed_out;
  return connection;
}

TcpConnection connected(UniqueFd fd) {
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  TcpConnection connection;
  connection.fd = std::move(fd);
  return connection;
}

}  // namespace

TcpConnection connect_tcp(const TcpAddress& address, Clock::time_point deadline, const Clock& clock,
                          milliseconds slice, const std::function<void()>& between_waits) {
  UniqueFd fd(::socket(address.address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return failed(errno);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) == 0)
    return connected(std::move(fd));
  if (errno != EINPROGRESS) return failed(errno);
  for (;;) {
    if (between_waits) between_waits();
    // Rounded up: a wait must not end before its deadline.
    const auto left = std::chrono::ceil<milliseconds>(deadline - clock.now());
    if (left.count() <= 0) return failed(ETIMEDOUT, true);
    pollfd writable{fd.get(), POLLOUT, 0};
    if (::poll(&writable, 1, static_cast<int>(std::min(left, slice).count())) <= 0) continue;
    int error = 0;
    socklen_t size = sizeof(error);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size);
    return error == 0 ? connected(std::move(fd)) : failed(error);
  }
}

TcpConnection connect_tcp(const std::vector<TcpAddress>& addresses, Clock::time_point deadline,
                          const Clock& clock) {
  TcpConnection connection = failed(EADDRNOTAVAIL);
  for (const TcpAddress& address : addresses) {
    connection = connect_tcp(address, deadline, clock);
    if (connection.fd) break;
  }
  return connection;
}

TcpConnection connect_tcp_until(const std::vector<TcpAddress>& addresses,
                                Clock::time_point deadline, const Clock& clock, milliseconds first,
                                milliseconds longest) {
  Backoff backoff(first, longest);
  for (;;) {
    TcpConnection connection = connect_tcp(addresses, deadline, clock);
    if (connection.fd || clock.now() >= deadline) return connection;
    clock.sleep_until(std::min(deadline, clock.now() + backoff.next()));
  }
}

}  // namespace acc::rendezvous
