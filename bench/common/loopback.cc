#include "loopback.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace acc::bench {

in_addr_t loopback_source(int block, int index) {
  const int address = index / kConnectionsPerAddress;
  return htonl((127u << 24) | (static_cast<unsigned>(block) << 16) |
               (static_cast<unsigned>(address + 1)));
}

int start_connect(in_addr_t source, int port, std::string& error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = "socket: " + std::string(std::strerror(errno));
    return -1;
  }
  int on = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof(on));
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = source;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
    error = "bind: " + std::string(std::strerror(errno));
    ::close(fd);
    return -1;
  }
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  server.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof(server)) != 0 &&
      errno != EINPROGRESS) {
    error = "connect: " + std::string(std::strerror(errno));
    ::close(fd);
    return -1;
  }
  return fd;
}

void close_with_reset(int fd) {
  linger hard{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  ::close(fd);
}

void raise_fd_limit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

void begin_run(const char* name, const char* what, const char* unit, int window) {
  raise_fd_limit();
  ::signal(SIGPIPE, SIG_IGN);
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  std::printf(
      "%s: %s; RLIMIT_NOFILE %llu (hard %llu); client processes of up to %d %s; handshake "
      "window %d\n",
      name, what, static_cast<unsigned long long>(limit.rlim_cur),
      static_cast<unsigned long long>(limit.rlim_max), connections_per_process(), unit, window);
  std::fflush(stdout);
}

void reap_or_kill(pid_t pid, int wait_ms) {
  for (int waited = 0; waited < wait_ms; waited += 10) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    ::usleep(10'000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

int connections_per_process() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  const long long usable = static_cast<long long>(limit.rlim_cur) - 128;
  return static_cast<int>(std::clamp<long long>(usable, 1, 16'000));
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string a, b, c;
  file >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace acc::bench
