#pragma once

// The store server's listening sockets, and (store_listener.cc) how an event loop accepts from
// them. The listeners sit in the epoll set of one loop at a time, the one that accepts: it admits
// each connection (who the peer is, for admission) and, when its descriptor table is full, hands
// the listeners over to the next loop (store_event_loop.h).

#include <string>
#include <vector>

#include "acc/rendezvous/store_server.h"

namespace acc::rendezvous::detail {

// Plain sockets: Asio's acceptor would start Asio's reactor (an epoll set, an eventfd and a
// timerfd of its own) that the loop never uses. Non-blocking and close-on-exec. Not thread-safe;
// port() and addresses() may be read from any thread once listen() has returned.
class Listeners {
 public:
  Listeners() = default;
  ~Listeners() { close(); }
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;

  // Listens on options.host (all IPv4 addresses where empty) and on each of options.more_hosts,
  // at options.port. host's listener picks the port where it is 0; the others take the same, and
  // where one finds it taken (another process listens there on that address alone) every
  // listener tries a fresh port, a few times. Throws NetworkError naming host:port when an
  // address is in use or cannot be bound, ConfigError when a host does not resolve, the port is
  // out of range or there are more than kMaxListeners hosts.
  void listen(const StoreServerOptions& options);
  // Closes the sockets, in the calling thread's descriptor table; port() and addresses() stay.
  void close();

  const std::vector<int>& fds() const { return fds_; }
  // The bound port (the chosen one where options.port was 0).
  int port() const { return port_; }
  // Every listener's "host:port", options.host's first.
  const std::vector<std::string>& addresses() const { return addresses_; }

 private:
  // A listening socket on host:port. Throws as listen().
  static int listen_on(const std::string& host, int port);
  static int port_of(int fd);

  std::vector<int> fds_;  // in the epoll set of the loop that accepts
  int port_ = 0;
  std::vector<std::string> addresses_;
};

}  // namespace acc::rendezvous::detail
