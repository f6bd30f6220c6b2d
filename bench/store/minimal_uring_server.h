#pragma once

// The yardstick with the fewest system calls: MinimalServer's answers (minimal_server.h), every
// socket operation through one io_uring: a multishot accept, a multishot receive per connection
// into a ring of provided buffers, and the sends; its thread is the ring's only issuer with its
// task work deferred to it, so each turn of the loop is one io_uring_enter that submits what the
// last turn queued and waits for the next completions. Under 32 clients it makes about 0.05
// system calls per operation, where the epoll yardstick makes two.
//
// Needs Linux 6.1 (deferred task work); ok() is false where io_uring or one of these features is
// missing or forbidden, and store_bench leaves the row out. The ring is the store server's Uring.

#include <linux/io_uring.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "minimal_server.h"
#include "uring.h"  // the store server's own

namespace acc::bench {

class MinimalUringServer {
 public:
  MinimalUringServer() : listener_(loopback_listener(0, port_)), ring_(256, ring_params()) {
    wake_ = ::eventfd(0, EFD_CLOEXEC);
    if (!ring_.ok() || !provide_buffers()) return;
    std::promise<bool> enabled;
    std::future<bool> answer = enabled.get_future();
    // The thread owns the promise: it may still be inside set_value when get() returns.
    thread_ = std::thread([this, enabled = std::move(enabled)]() mutable { loop(enabled); });
    ok_ = answer.get();
    if (!ok_) thread_.join();
  }
  ~MinimalUringServer() {
    if (thread_.joinable()) {
      std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wake_, &one, sizeof(one));
      thread_.join();
    }
    for (auto& [id, conn] : connections_) ::close(conn.fd);
    ring_.close();
    if (buffer_ring_) ::munmap(buffer_ring_, kBuffers * sizeof(io_uring_buf));
    ::close(listener_);
    ::close(wake_);
  }
  MinimalUringServer(const MinimalUringServer&) = delete;
  MinimalUringServer& operator=(const MinimalUringServer&) = delete;

  bool ok() const { return ok_; }
  int port() const { return port_; }

 private:
  // A completion's user_data: what it was, and for which connection (ids are never reused, so a
  // late completion for a dropped connection finds nothing).
  enum Kind : std::uint64_t { kAccept = 1, kReceive = 2, kSend = 3, kWake = 4 };
  static std::uint64_t tag(Kind kind, std::uint32_t id) {
    return (static_cast<std::uint64_t>(kind) << 32) | id;
  }

  struct Connection {
    int fd = -1;
    MinimalConnection parsed;
    std::string sending;  // in flight: stays in place until its completion
    std::string waiting;  // answers that came while it was in flight
  };

  static constexpr unsigned kBuffers = 256;  // a power of two
  static constexpr unsigned kBufferBytes = 4096;

  static io_uring_params ring_params() {
    io_uring_params params{};
    // Disabled until the loop thread enables it, which makes that thread its single issuer.
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                   IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
    params.cq_entries = 4096;
    return params;
  }

  // The provided buffers the receives fill: group 0.
  bool provide_buffers() {
    buffers_.resize(kBuffers * kBufferBytes);
    void* ring = ::mmap(nullptr, kBuffers * sizeof(io_uring_buf), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ring == MAP_FAILED) return false;
    buffer_ring_ = static_cast<io_uring_buf*>(ring);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<std::uint64_t>(ring);
    registration.ring_entries = kBuffers;
    registration.bgid = 0;
    if (::syscall(__NR_io_uring_register, ring_.fd(), IORING_REGISTER_PBUF_RING, &registration, 1) <
        0)
      return false;
    for (unsigned id = 0; id < kBuffers; ++id) give_back_buffer(id);
    publish_buffers();
    return true;
  }

  // The buffer ring's entries start at its first byte, the kernel's tail overlaying the first
  // entry's last two bytes (io_uring_buf_ring). Not io_uring_buf_ring::bufs: in C++ the header's
  // flexible-array wrapper holds an empty struct, which moves that array 8 bytes on.
  void give_back_buffer(unsigned id) {
    io_uring_buf& entry = buffer_ring_[buffer_tail_ & (kBuffers - 1)];
    entry.addr = reinterpret_cast<std::uint64_t>(buffers_.data() + id * kBufferBytes);
    entry.len = kBufferBytes;
    entry.bid = static_cast<std::uint16_t>(id);
    ++buffer_tail_;
  }
  void publish_buffers() {
    auto* tail = reinterpret_cast<std::uint16_t*>(reinterpret_cast<char*>(buffer_ring_) +
                                                  offsetof(io_uring_buf, resv));
    __atomic_store_n(tail, buffer_tail_, __ATOMIC_RELEASE);
  }

  io_uring_sqe& next_submission() {
    if (ring_.queued() == ring_.entries()) ring_.enter(0);
    return ring_.queue();
  }

  void accept_all() {
    io_uring_sqe& sqe = next_submission();
    sqe.opcode = IORING_OP_ACCEPT;
    sqe.fd = listener_;
    sqe.ioprio = IORING_ACCEPT_MULTISHOT;
    sqe.accept_flags = SOCK_CLOEXEC;
    sqe.user_data = tag(kAccept, 0);
  }
  void receive_all(std::uint32_t id, int fd) {
    io_uring_sqe& sqe = next_submission();
    sqe.opcode = IORING_OP_RECV;
    sqe.fd = fd;
    sqe.flags = IOSQE_BUFFER_SELECT;
    sqe.buf_group = 0;
    sqe.ioprio = IORING_RECV_MULTISHOT;
    sqe.user_data = tag(kReceive, id);
  }
  void send(std::uint32_t id, const Connection& conn) {
    io_uring_sqe& sqe = next_submission();
    sqe.opcode = IORING_OP_SEND;
    sqe.fd = conn.fd;
    sqe.addr = reinterpret_cast<std::uint64_t>(conn.sending.data());
    sqe.len = static_cast<std::uint32_t>(conn.sending.size());
    sqe.msg_flags = MSG_NOSIGNAL | MSG_WAITALL;  // completes once all is sent, or fails
    sqe.user_data = tag(kSend, id);
  }
  void watch_wake() {
    io_uring_sqe& sqe = next_submission();
    sqe.opcode = IORING_OP_READ;
    sqe.fd = wake_;
    sqe.addr = reinterpret_cast<std::uint64_t>(&wake_value_);
    sqe.len = sizeof(wake_value_);
    sqe.user_data = tag(kWake, 0);
  }

  void drop(std::uint32_t id) {
    auto found = connections_.find(id);
    if (found == connections_.end()) return;
    ::close(found->second.fd);  // its operations still in the ring end with errors
    connections_.erase(found);
  }

  void received(std::uint32_t id, const io_uring_cqe& cqe) {
    auto found = connections_.find(id);
    if (cqe.flags & IORING_CQE_F_BUFFER) {
      const unsigned buffer = cqe.flags >> IORING_CQE_BUFFER_SHIFT;
      if (cqe.res > 0 && found != connections_.end())
        found->second.parsed.input.append(buffers_.data() + buffer * kBufferBytes,
                                          static_cast<std::size_t>(cqe.res));
      give_back_buffer(buffer);
      buffers_given_ = true;
    }
    if (found == connections_.end()) return;
    Connection& conn = found->second;
    if (cqe.res == 0 || (cqe.res < 0 && cqe.res != -ENOBUFS)) return drop(id);
    if (!(cqe.flags & IORING_CQE_F_MORE)) receive_all(id, conn.fd);  // it ended: again
    if (!conn.sending.empty()) return answers_.answer(conn.parsed, conn.waiting);
    answers_.answer(conn.parsed, conn.sending);
    if (!conn.sending.empty()) send(id, conn);
  }

  void sent(std::uint32_t id, const io_uring_cqe& cqe) {
    auto found = connections_.find(id);
    if (found == connections_.end()) return;
    if (cqe.res < 0) return drop(id);
    Connection& conn = found->second;
    conn.sending.clear();
    conn.sending.swap(conn.waiting);
    if (!conn.sending.empty()) send(id, conn);
  }

  // Enables the ring on this thread (its single issuer), says whether that worked, and serves.
  void loop(std::promise<bool>& enabled) {
    const bool ok = ::syscall(__NR_io_uring_register, ring_.fd(), IORING_REGISTER_ENABLE_RINGS,
                              nullptr, 0) == 0;
    enabled.set_value(ok);
    if (!ok) return;
    accept_all();
    watch_wake();
    for (;;) {
      ring_.enter(1);  // what the last turn queued, then waits for a completion
      while (const io_uring_cqe* next = ring_.next_completion()) {
        const io_uring_cqe cqe = *next;
        ring_.pop_completion();
        const auto id = static_cast<std::uint32_t>(cqe.user_data);
        switch (static_cast<Kind>(cqe.user_data >> 32)) {
          case kWake:
            return;
          case kAccept:
            if (cqe.res >= 0) {
              int on = 1;
              ::setsockopt(cqe.res, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
              const std::uint32_t accepted = ++last_id_;
              connections_[accepted].fd = cqe.res;
              receive_all(accepted, cqe.res);
            }
            if (!(cqe.flags & IORING_CQE_F_MORE)) accept_all();
            break;
          case kReceive:
            received(id, cqe);
            break;
          case kSend:
            sent(id, cqe);
            break;
        }
      }
      if (buffers_given_) publish_buffers();
      buffers_given_ = false;
    }
  }

  int port_ = 0;
  int listener_ = -1;
  int wake_ = -1;
  bool ok_ = false;
  std::uint64_t wake_value_ = 0;
  rendezvous::detail::Uring ring_;
  std::vector<char> buffers_;
  io_uring_buf* buffer_ring_ = nullptr;
  std::uint16_t buffer_tail_ = 0;
  bool buffers_given_ = false;
  std::uint32_t last_id_ = 0;
  std::unordered_map<std::uint32_t, Connection> connections_;
  MinimalAnswers answers_;
  std::thread thread_;
};

}  // namespace acc::bench
