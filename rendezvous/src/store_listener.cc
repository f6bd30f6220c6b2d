#include "store_listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
// Boost 1.74 Asio uses std::exchange without including <utility> under C++20.
#include <utility>
// clang-format off
#include <boost/asio.hpp>
// clang-format on
#include <memory>

#include "acc/common/endpoint.h"
#include "acc/common/error.h"
#include "store_event_loop.h"

namespace acc::rendezvous::detail {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

tcp::endpoint resolve_endpoint(const std::string& host, int port) {
  ACC_CHECK(port >= 0 && port <= 65535, ConfigError, "store port ", port,
            " is out of range; use 0 to 65535");
  auto port_number = static_cast<unsigned short>(port);
  if (host.empty() || host == "0.0.0.0") return {tcp::v4(), port_number};
  if (host == "::") return {tcp::v6(), port_number};
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return {address, port_number};
  asio::io_context io;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  ACC_CHECK(!ec && !results.empty(), ConfigError, "cannot resolve store host '", host,
            "': ", ec ? ec.message() : "no address", "; pass an IP address or a known name");
  return results.begin()->endpoint();
}

}  // namespace

void Listeners::listen(const StoreServerOptions& options) {
  std::vector<std::string> hosts{options.host.empty() ? "0.0.0.0" : options.host};
  hosts.insert(hosts.end(), options.more_hosts.begin(), options.more_hosts.end());
  ACC_CHECK(hosts.size() <= kMaxListeners, ConfigError, "the store listens on at most ",
            kMaxListeners, " addresses, not ", hosts.size());
  for (int tries = 1;; ++tries) {
    port_ = options.port;
    try {
      for (const std::string& host : hosts) {
        fds_.push_back(listen_on(host, port_));
        if (port_ == 0) port_ = port_of(fds_.back());
      }
      break;
    } catch (const NetworkError&) {
      close();
      if (options.port != 0 || hosts.size() == 1 || tries == 8) throw;
    }
  }
  for (const std::string& host : hosts) addresses_.push_back(format_endpoint(host, port_));
}

int Listeners::listen_on(const std::string& host, int port) {
  const tcp::endpoint endpoint = resolve_endpoint(host, port);
  const std::string where = format_endpoint(host, port);
  const int fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                          IPPROTO_TCP);
  ACC_CHECK(fd >= 0, NetworkError, "cannot open a socket for ", where, ": ", std::strerror(errno));
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (endpoint.address().is_v6() && endpoint.address().is_unspecified()) {
    int off = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  const int bound = ::bind(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size()));
  const int bind_error = errno;
  const int listened = bound == 0 ? ::listen(fd, SOMAXCONN) : -1;
  const int error = errno;
  if (listened != 0) ::close(fd);
  ACC_CHECK(bound == 0 || bind_error != EADDRINUSE, NetworkError, "address ", where,
            " is already in use; stop the process that holds it or choose another port");
  ACC_CHECK(bound == 0, NetworkError, "cannot listen on ", where, ": ", std::strerror(bind_error));
  ACC_CHECK(listened == 0, NetworkError, "cannot listen on ", where, ": ", std::strerror(error));
  return fd;
}

int Listeners::port_of(int fd) {
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
  return ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(local).sin6_port
                                           : reinterpret_cast<const sockaddr_in&>(local).sin_port);
}

void Listeners::close() {
  for (int fd : fds_) ::close(fd);
  fds_.clear();
}

bool EventLoop::watch_listeners() {
  for (std::size_t i = 0; i < listen_fds.size(); ++i)
    if (!watch(listen_fds[i], kFirstListenerTag + i, EPOLLIN)) return false;
  return true;
}

void EventLoop::unwatch_listeners() {
  for (int fd : listen_fds) ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
}

void EventLoop::accept_ready(int listen_fd) {
  for (int i = 0; i < kAcceptsPerEvent; ++i) {
    // accept4 makes the socket close-on-exec atomically, so a concurrent fork+exec in the
    // launcher's thread cannot leak it; Asio's own accept does not.
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE && hand_over()) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        return out_of_descriptors(errno);
      return;  // EAGAIN: nothing more to accept now
    }
    out_of_descriptors_logged = false;
    add_connection(fd);
    // The table is full but for its spare descriptors (kSpareDescriptors): the next loop, with a
    // table of its own, accepts from now on. Where this thread could not have a table of its own,
    // neither can the next; it goes on to EMFILE. (ENFILE above is the whole system's limit:
    // another table does not help.)
    if (private_table && fd >= fd_limit - kSpareDescriptors) {
      if (!hand_over()) out_of_descriptors(EMFILE);
      return;
    }
  }
}

bool EventLoop::hand_over() {
  if (!private_table || !start_next_loop()) return false;
  unwatch_listeners();
  return true;
}

void EventLoop::out_of_descriptors(int error) {
  if (!out_of_descriptors_logged) {
    out_of_descriptors_logged = true;
    options.log(out_of_descriptors_message(error));
  }
  unwatch_listeners();
  retry_accept_soon();
}

void EventLoop::retry_accept_soon() {
  itimerspec once{};
  once.it_value.tv_nsec = 100'000'000;
  ::timerfd_settime(accept_retry_fd, 0, &once, nullptr);
}

bool EventLoop::has_spare_descriptors() const {
  if (!private_table) return true;
  const int probe = ::dup(wake_fd);
  if (probe >= 0) ::close(probe);
  return probe >= 0 && probe < fd_limit - kSpareDescriptors;
}

std::string EventLoop::out_of_descriptors_message(int error) const {
  std::string text = "cannot accept a connection: " + std::string(std::strerror(error)) + " (" +
                     std::to_string(total_connections.load()) + " connections open";
  rlimit limit{};
  if ((error == EMFILE || error == ENFILE) && ::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    text += "; open-file limit " + std::to_string(limit.rlim_cur) + ", hard limit " +
            std::to_string(limit.rlim_max) +
            "); more clients wait in the listener's queue until connections close. "
            "Raise the hard limit (ulimit -Hn as root, LimitNOFILE=) for more";
  } else {
    text += "); retrying every 100 ms";
  }
  return text;
}

void EventLoop::add_connection(int fd) {
  int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  auto conn = std::make_shared<Connection>(fd, next_id);
  next_id += kMaxLoops;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = conn->id;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
    ::close(fd);
    return;
  }
  sockaddr_storage remote{};
  socklen_t length = sizeof(remote);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &length) == 0) {
    tcp::endpoint endpoint;
    endpoint.resize(length);
    std::memcpy(endpoint.data(), &remote, length);
    conn->peer_host = endpoint.address().to_string();
    conn->peer = format_endpoint(conn->peer_host, endpoint.port());
    // A peer at this socket's own address is on this host (node 0's workers reach MASTER_ADDR,
    // an address of node 0): admission takes it as loopback.
    sockaddr_storage own{};
    socklen_t own_length = sizeof(own);
    if (options.admit_members_only &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&own), &own_length) == 0) {
      tcp::endpoint local;
      local.resize(own_length);
      std::memcpy(local.data(), &own, own_length);
      conn->from_this_host = local.address() == endpoint.address();
    }
  } else {
    conn->peer = "?";
  }
  connections.emplace(conn->id, conn);
  total_connections.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace acc::rendezvous::detail
