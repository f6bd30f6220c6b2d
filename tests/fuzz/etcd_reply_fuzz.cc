// etcd's replies (rendezvous/src/etcd_client.cc): the real EtcdClient against a fake member on
// loopback that answers every request of the KV API with the input's JSON (up to its first NUL),
// and a watch with the rest as the body of its chunked stream. The client reads the replies as it
// would etcd's: check() and compare_set() parse transaction replies (responses, kvs, base64
// values, the header's revision), watch() reads the stream's chunks. StoreError (a reply that is
// not etcd's) and the other acc::Error types are the client's answer to bad replies; a crash, a
// sanitizer report or a hang is a bug.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "acc/common/error.h"
#include "acc/rendezvous/etcd_client.h"

namespace {

// One connection at a time, one reply each (Connection: close): the client sends its requests
// one after the other.
class FakeEtcd {
 public:
  FakeEtcd() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      std::abort();
    port_ = ntohs(address.sin_port);
    std::thread([this] { serve(); }).detach();
  }
  int port() const { return port_; }
  void answer(std::string json, std::string stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    json_ = std::move(json);
    stream_ = std::move(stream);
  }

 private:
  void serve() {
    for (;;) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      const std::string request = read_request(fd);
      std::string reply;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (request.find(" /v3/watch ") != std::string::npos) {
          reply =
              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              "Transfer-Encoding: chunked\r\n\r\n" +
              stream_;
        } else {
          reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(json_.size()) + "\r\nConnection: close\r\n\r\n" + json_;
        }
      }
      for (std::size_t sent = 0; sent < reply.size();) {
        const ssize_t n = ::send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
      }
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
    }
  }

  // The request line and headers, and the body its Content-Length announces.
  static std::string read_request(int fd) {
    std::string request;
    char buffer[4096];
    for (;;) {
      const std::size_t end = request.find("\r\n\r\n");
      if (end != std::string::npos) {
        const std::size_t at = request.find("Content-Length: ");
        const std::size_t body =
            at == std::string::npos ? 0 : std::strtoul(&request[at + 16], nullptr, 10);
        if (request.size() >= end + 4 + body) return request;
      }
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return request;
      request.append(buffer, static_cast<std::size_t>(n));
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mutex_;
  std::string json_;
  std::string stream_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static FakeEtcd* const etcd = new FakeEtcd;  // lives as long as the process
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  etcd->answer(std::string(input.substr(0, nul)),
               nul == std::string_view::npos ? "" : std::string(input.substr(nul + 1)));
  using std::chrono::milliseconds;
  acc::rendezvous::EtcdClientOptions options;
  options.endpoints = {"127.0.0.1:" + std::to_string(etcd->port())};
  options.timeout = milliseconds(2000);
  try {
    acc::rendezvous::EtcdClient client(options);
    try {
      client.check({"a", "b"});
    } catch (const acc::StoreError&) {
    }
    try {
      client.compare_set("a", "x", "y");
    } catch (const acc::StoreError&) {
    }
    auto watch = client.watch("a", milliseconds(2000));
    for (int polls = 0; polls < 100; ++polls) {
      pollfd p{watch->fd(), POLLIN, 0};
      ::poll(&p, 1, 20);
      if (watch->fired()) break;
    }
  } catch (const acc::Error&) {
  }
  return 0;
}
