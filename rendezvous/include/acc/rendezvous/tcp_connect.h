#pragma once

// Name resolution and TCP connects, written once for the store client, the etcd client and the
// launcher's own connections (the pre-flight reachability check, NCCL's RAS port): a host is
// resolved once, each of its addresses is tried with a non-blocking connect bounded by a deadline
// on a Clock, and, for a server that may not be up yet, the tries go on after a growing pause
// until the deadline. What a failure means is left to the caller, which names what it connected
// to and why in its own words.

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "acc/common/unique_fd.h"
#include "acc/rendezvous/clock.h"

namespace acc::rendezvous {

// One address a host name resolved to.
struct TcpAddress {
  sockaddr_storage address{};
  socklen_t length = 0;
};

// What resolve_tcp() found: the addresses, or getaddrinfo's status.
struct TcpResolution {
  int status = 0;  // 0, or getaddrinfo's EAI_* code
  std::vector<TcpAddress> addresses;
  // getaddrinfo's message for `status` ("Name or service not known").
  std::string error() const;
};

// The TCP addresses of `host` at `port` (getaddrinfo, any address family). Blocks as long as the
// system's resolver takes (DNS may take seconds, and cannot be interrupted). Thread-safe; never
// throws but std::bad_alloc.
TcpResolution resolve_tcp(const std::string& host, int port);

// How a connect ended: the connected socket, or why there is none.
struct TcpConnection {
  UniqueFd fd;             // connected, blocking, close-on-exec, TCP_NODELAY; empty on failure
  int error = 0;           // the last failure's errno (ECONNREFUSED, ENETUNREACH, ...)
  bool timed_out = false;  // `deadline` passed before any answer: nothing answered
};

// One non-blocking connect to `address`, waited for until `deadline` on `clock` in waits no
// longer than `slice`; `between_waits` (may be empty) runs before each wait and may throw to stop
// it (a stop signal). Blocks until an answer, the deadline, or a throw. Thread-safe.
TcpConnection connect_tcp(const TcpAddress& address, Clock::time_point deadline,
                          const Clock& clock = Clock::steady(),
                          std::chrono::milliseconds slice = std::chrono::hours(24),
                          const std::function<void()>& between_waits = {});

// Each of `addresses` in turn, until one connects, by `deadline`; the last failure otherwise
// (error EADDRNOTAVAIL when there is no address). Blocks as connect_tcp does. Thread-safe.
TcpConnection connect_tcp(const std::vector<TcpAddress>& addresses, Clock::time_point deadline,
                          const Clock& clock = Clock::steady());

// As connect_tcp(addresses, ...), tried again after a pause (`first`, doubling up to `longest`)
// until one connects or `deadline` passes: for a server that may start after its clients. Blocks
// up to `deadline`. Thread-safe.
TcpConnection connect_tcp_until(const std::vector<TcpAddress>& addresses,
                                Clock::time_point deadline, const Clock& clock,
                                std::chrono::milliseconds first, std::chrono::milliseconds longest);

}  // namespace acc::rendezvous
