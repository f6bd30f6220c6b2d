#pragma once

// The yardsticks of store_bench: servers that parse the same frames with our codec and answer at
// once, with no store behind them (GET returns a fixed value, ADD a counter, WAIT is ready at
// once). Not stores: what a server costs under these clients when it does nothing but parse and
// answer. MinimalServer is one epoll thread reading up to 64 KiB and writing its replies once per
// read, one send each or the round's together through the store server's send ring;
// MinimalUringServer (minimal_uring_server.h) does all of its socket work through one io_uring.
//
// MinimalAnswers tells each connection's dialect from its first bytes as the store server does,
// so PyTorch 2.2+ clients (VALIDATE, then a PING they wait for) are answered too; answering only
// 1.13's frames left a 2.x client blocked in its PING for ever, which hung store_bench.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "acc/rendezvous/protocol.h"
#include "send_ring.h"  // the store server's own

namespace acc::bench {

// A listening TCP socket on 127.0.0.1 at a port the kernel picks (stored in `port`);
// `type_flags` are added to SOCK_STREAM | SOCK_CLOEXEC.
inline int loopback_listener(int type_flags, int& port) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | type_flags, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::listen(listener, 4096);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
  return listener;
}

// A yardstick connection's unanswered bytes and dialect.
struct MinimalConnection {
  std::string input;
  bool dialect_known = false;
  rendezvous::Dialect dialect = rendezvous::Dialect::kV1_13;
};

// The answers of a store that holds nothing.
class MinimalAnswers {
 public:
  // Appends the replies to every whole request at the front of `conn.input` and drops them.
  void answer(MinimalConnection& conn, std::string& replies) {
    namespace rdzv = acc::rendezvous;
    std::size_t offset = 0;
    if (!conn.dialect_known) {
      auto detection = rdzv::detect_dialect(conn.input, rdzv::Dialect::kV1_13);
      if (!detection.complete) return;
      conn.dialect_known = true;
      conn.dialect = detection.dialect;
      offset = detection.consumed;
    }
    for (;;) {
      auto parsed = rdzv::parse_request(std::string_view(conn.input).substr(offset), conn.dialect,
                                        rdzv::Limits{}, request_);
      if (parsed.status != rdzv::ParseStatus::kComplete) break;
      offset += parsed.consumed;
      switch (request_.op) {
        case rdzv::Op::kGet:
          rdzv::append_u64(replies, value_.size());
          replies += value_;
          break;
        case rdzv::Op::kAdd:
          rdzv::append_i64(replies, ++counter_);
          break;
        case rdzv::Op::kWait:  // PyTorch's get() waits for the key first
          rdzv::append_u8(replies, rdzv::kStopWaiting);
          break;
        case rdzv::Op::kPing:
          rdzv::append_u32(replies, static_cast<std::uint32_t>(request_.number));
          break;
        default:  // SET, VALIDATE: no reply
          break;
      }
    }
    conn.input.erase(0, offset);
  }

 private:
  rendezvous::Request request_;
  const std::string value_ = std::string(64, 'v');
  std::int64_t counter_ = 0;
};

class MinimalServer {
 public:
  explicit MinimalServer(bool batched = false) : batched_(batched) {
    listener_ = loopback_listener(SOCK_NONBLOCK, port_);
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    add(listener_);
    add(wake_);
    thread_ = std::thread([this] { loop(); });
  }
  ~MinimalServer() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_, &one, sizeof(one));
    thread_.join();
    for (auto& [fd, connection] : connections_) ::close(fd);
    ::close(listener_);
    ::close(wake_);
    ::close(epoll_);
  }
  int port() const { return port_; }

 private:
  void add(int fd) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
  }

  void loop() {
    std::vector<char> chunk(64 * 1024);
    std::string replies;
    epoll_event events[256];
    rendezvous::detail::SendRing ring(256);
    std::vector<std::string> round_replies(256);
    for (;;) {
      const int ready = ::epoll_wait(epoll_, events, 256, -1);
      for (int e = 0; e < ready; ++e) {
        const int fd = events[e].data.fd;
        if (fd == wake_) return;
        if (fd == listener_) {
          for (int client; (client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
            int on = 1;
            ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
            connections_[client];
            add(client);
          }
          continue;
        }
        const ssize_t n = ::recv(fd, chunk.data(), chunk.size(), MSG_DONTWAIT);
        if (n <= 0) {
          if (n < 0 && errno == EAGAIN) continue;
          ::close(fd);
          connections_.erase(fd);
          continue;
        }
        MinimalConnection& conn = connections_[fd];
        conn.input.append(chunk.data(), static_cast<std::size_t>(n));
        replies.clear();
        answers_.answer(conn, replies);
        if (replies.empty()) continue;
        if (batched_ && ring.ok()) {
          std::string& kept = round_replies[static_cast<std::size_t>(e)];
          kept.swap(replies);  // stays in place until the ring's flush below
          ring.send(fd, kept.data(), kept.size(), 0);
        } else {
          ::send(fd, replies.data(), replies.size(), MSG_NOSIGNAL);
        }
      }
      ring.flush([](std::uint64_t, int) {});
    }
  }

  int listener_ = -1;
  int epoll_ = -1;
  int wake_ = -1;
  int port_ = 0;
  std::map<int, MinimalConnection> connections_;
  MinimalAnswers answers_;
  std::thread thread_;
  bool batched_ = false;
};

}  // namespace acc::bench
