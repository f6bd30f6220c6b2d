#pragma once

// The yardstick with the fewest system calls: MinimalServer's answers (minimal_server.h), every
// socket operation through one io_uring: a multishot accept, a multishot receive per connection
// into a ring of provided buffers, and the sends; its thread is the ring's only issuer with its
// task work deferred to it, so each turn of the loop is one io_uring_enter that submits what the
// last turn queued and waits for the next completions. Under 32 clients it makes about 0.05
// system calls per operation, where the epoll yardstick makes two.
//
// Needs Linux 6.1 (deferred task work); ok() is false where io_uring or one of these features is
// missing or forbidden, and store_bench leaves the row out. Raw system calls, as the store
// server's SendRing (liburing is not a dependency).

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
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "minimal_server.h"

namespace acc::bench {

class MinimalUringServer {
 public:
  MinimalUringServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(listener_, 4096);
    socklen_t length = sizeof(address);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    wake_ = ::eventfd(0, EFD_CLOEXEC);
    if (!set_up_ring()) return;
    ok_ = true;
    thread_ = std::thread([this] { loop(); });
  }
  ~MinimalUringServer() {
    if (thread_.joinable()) {
      std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wake_, &one, sizeof(one));
      thread_.join();
    }
    for (auto& [id, conn] : connections_) ::close(conn.fd);
    if (buffer_ring_) ::munmap(buffer_ring_, kBuffers * sizeof(io_uring_buf));
    for (auto& [memory, bytes] : maps_) ::munmap(memory, bytes);
    if (ring_ >= 0) ::close(ring_);
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

  bool set_up_ring() {
    io_uring_params params{};
    // Disabled until the loop thread enables it, which makes that thread its single issuer.
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                   IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
    params.cq_entries = 4096;
    const long fd = ::syscall(__NR_io_uring_setup, 256, &params);
    if (fd < 0) return false;
    ring_ = static_cast<int>(fd);
    char* sq = map(params.sq_off.array + params.sq_entries * sizeof(unsigned), IORING_OFF_SQ_RING);
    char* cq =
        map(params.cq_off.cqes + params.cq_entries * sizeof(io_uring_cqe), IORING_OFF_CQ_RING);
    sqes_ = reinterpret_cast<io_uring_sqe*>(
        map(params.sq_entries * sizeof(io_uring_sqe), IORING_OFF_SQES));
    if (!sq || !cq || !sqes_) return false;
    sq_entries_ = params.sq_entries;
    sq_tail_ = reinterpret_cast<unsigned*>(sq + params.sq_off.tail);
    sq_mask_ = *reinterpret_cast<unsigned*>(sq + params.sq_off.ring_mask);
    sq_array_ = reinterpret_cast<unsigned*>(sq + params.sq_off.array);
    cq_head_ = reinterpret_cast<unsigned*>(cq + params.cq_off.head);
    cq_tail_ = reinterpret_cast<unsigned*>(cq + params.cq_off.tail);
    cq_mask_ = *reinterpret_cast<unsigned*>(cq + params.cq_off.ring_mask);
    cqes_ = reinterpret_cast<io_uring_cqe*>(cq + params.cq_off.cqes);

    // The provided buffers the receives fill: group 0.
    buffers_.resize(kBuffers * kBufferBytes);
    void* ring = ::mmap(nullptr, kBuffers * sizeof(io_uring_buf), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ring == MAP_FAILED) return false;
    buffer_ring_ = static_cast<io_uring_buf*>(ring);
    io_uring_buf_reg registration{};
    registration.ring_addr = reinterpret_cast<std::uint64_t>(ring);
    registration.ring_entries = kBuffers;
    registration.bgid = 0;
    if (::syscall(__NR_io_uring_register, ring_, IORING_REGISTER_PBUF_RING, &registration, 1) < 0)
      return false;
    for (unsigned id = 0; id < kBuffers; ++id) give_back_buffer(id);
    publish_buffers();
    return true;
  }

  char* map(std::size_t bytes, off_t offset) {
    void* memory =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring_, offset);
    if (memory == MAP_FAILED) return nullptr;
    maps_.emplace_back(memory, bytes);
    return static_cast<char*>(memory);
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
    if (queued_ == sq_entries_) enter(0);
    const unsigned tail = *sq_tail_;  // only this thread writes it
    const unsigned index = tail & sq_mask_;
    io_uring_sqe& sqe = sqes_[index];
    std::memset(&sqe, 0, sizeof(sqe));
    sq_array_[index] = index;
    __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
    ++queued_;
    return sqe;
  }
  // Submits what is queued and, with `wait`, waits for at least one completion.
  void enter(bool wait) {
    long taken;
    do {
      taken = ::syscall(__NR_io_uring_enter, ring_, queued_, wait ? 1 : 0,
                        wait ? IORING_ENTER_GETEVENTS : 0, nullptr, 0);
    } while (taken < 0 && errno == EINTR);
    if (taken > 0) queued_ -= static_cast<unsigned>(taken);
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

  void loop() {
    if (::syscall(__NR_io_uring_register, ring_, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) < 0)
      return;
    accept_all();
    watch_wake();
    for (;;) {
      enter(/*wait=*/true);
      for (;;) {
        const unsigned head = *cq_head_;
        if (head == __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE)) break;
        const io_uring_cqe cqe = cqes_[head & cq_mask_];
        __atomic_store_n(cq_head_, head + 1, __ATOMIC_RELEASE);
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

  int listener_ = -1;
  int wake_ = -1;
  int port_ = 0;
  bool ok_ = false;
  std::uint64_t wake_value_ = 0;
  int ring_ = -1;
  std::vector<std::pair<void*, std::size_t>> maps_;
  io_uring_sqe* sqes_ = nullptr;
  unsigned sq_entries_ = 0;
  unsigned queued_ = 0;
  unsigned* sq_tail_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
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
