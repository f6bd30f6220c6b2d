#pragma once

// A loopback port that refuses connections while the object lives: a socket bound to a port the
// kernel picked and never listening, so that no other test is given the port meanwhile (a port
// learnt and released at once could be). It is bound with SO_REUSEADDR: a server the test starts
// on it later (acc-launch's store, which binds with SO_REUSEADDR too) can still listen there.
// Header-only, for every test binary.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace acc::testing {

class RefusingPort {
 public:
  RefusingPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const int on = 1;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("cannot bind a loopback socket");
    }
    port_ = ntohs(address.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  int port() const { return port_; }
  // Starts listening on the port, as a master that came up late: the next connect is accepted
  // (by the kernel's backlog; nothing answers beyond that).
  void listen() {
    if (::listen(fd_, 16) != 0) throw std::runtime_error("cannot listen on a loopback socket");
  }
  // "127.0.0.1:PORT".
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_ = 0;
};

}  // namespace acc::testing
