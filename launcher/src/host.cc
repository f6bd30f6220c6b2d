#include "acc/launcher/host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "acc/common/error.h"
#include "acc/launcher/topology.h"

extern char** environ;

namespace acc::launcher {
namespace {

int count_gpus() {
  std::error_code ec;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    (void)entry;
    ++count;
  }
  return count;
}

class Socket {
 public:
  Socket() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    ACC_CHECK(fd_ >= 0, NetworkError, "cannot create a socket: ", std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Returns 0 or errno.
  int bind_any(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return errno;
    return ::listen(fd_, 1) == 0 ? 0 : errno;
  }
  int port() const {
    sockaddr_in address{};
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    return ntohs(address.sin_port);
  }

 private:
  int fd_;
};

}  // namespace

HostInfo detect_host() {
  HostInfo host;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) host.hostname = name;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  host.cpu_count = cpus > 0 ? static_cast<int>(cpus) : 1;
  host.gpu_count = count_gpus();
  const char* root = std::getenv("ACC_HOST_ROOT");
  host.topology = read_cpu_topology(root && *root ? root : "/");
  host.topology.allowed_cpus = allowed_cpus_of_this_process();
  for (char** entry = environ; *entry; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals)
      host.environment.emplace(std::string(*entry, static_cast<size_t>(equals - *entry)),
                               std::string(equals + 1));
  }
  return host;
}

int pick_free_port() {
  Socket socket;
  const int error = socket.bind_any(0);
  ACC_CHECK(error == 0, NetworkError, "cannot find a free port: ", std::strerror(error));
  return socket.port();
}

void ensure_port_free(const std::string& address, int port) {
  Socket socket;
  const int error = socket.bind_any(port);
  ACC_CHECK(error == 0, NetworkError, "cannot listen on ", address, ":", port, ": ",
            std::strerror(error),
            error == EADDRINUSE ? " (another job has it); choose another --master_port or use "
                                  "--standalone"
                                : "");
}

}  // namespace acc::launcher
