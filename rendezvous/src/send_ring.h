#pragma once

// Sends to many sockets in one system call: an io_uring whose submissions are IORING_OP_SEND
// with MSG_DONTWAIT, submitted and completed together by flush(). The store server answers a poll
// round's requests through it. Waking a client is most of what a send costs, and a woken client
// often preempts its waker on the way out of the system call; one submission for the whole round
// is preempted at most once (bench/README.md, "Store server CPU per operation").
//
// Raw system calls (liburing is not a dependency). Where io_uring is missing or forbidden (old
// kernels, kernel.io_uring_disabled, container seccomp profiles) ok() is false and the caller
// sends one by one. Not thread-safe; the ring's descriptor is close-on-exec.

#include <linux/io_uring.h>

#include <cstddef>
#include <cstdint>

namespace acc::rendezvous::detail {

class SendRing {
 public:
  // Up to `entries` sends per flush (rounded up to a power of two by the kernel).
  explicit SendRing(unsigned entries);
  ~SendRing();
  SendRing(const SendRing&) = delete;
  SendRing& operator=(const SendRing&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Sends that fit before a flush() is needed.
  bool full() const { return queued_ == entries_; }

  // Queues a send of [data, data + size) to `fd`, tagged `tag`. The bytes must stay in place
  // until flush() returns. Call only when ok() and not full().
  void send(int fd, const char* data, std::size_t size, std::uint64_t tag);

  // Submits every queued send and waits for all of them (with MSG_DONTWAIT none waits for room:
  // a full socket completes at once with -EAGAIN), calling on_done(tag, result) for each one
  // that completed, result being the bytes sent or -errno. If the kernel refuses the submission
  // (it should not: completions are reaped at every flush), the ring disables itself and ok()
  // turns false; a send without on_done sent nothing, and the caller sends it itself.
  template <typename OnDone>
  void flush(OnDone&& on_done) {
    if (queued_ == 0) return;
    const bool submitted = submit_and_wait();
    while (const io_uring_cqe* cqe = next_completion()) {
      on_done(cqe->user_data, cqe->res);
      pop_completion();
    }
    if (!submitted) close();
  }

 private:
  bool submit_and_wait();
  void close();
  const io_uring_cqe* next_completion() const;
  void pop_completion();

  int fd_ = -1;
  unsigned entries_ = 0;
  unsigned queued_ = 0;
  void* sq_ring_ = nullptr;
  std::size_t sq_ring_bytes_ = 0;
  void* cq_ring_ = nullptr;
  std::size_t cq_ring_bytes_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  std::size_t sqes_bytes_ = 0;
  unsigned* sq_tail_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned* sq_array_ = nullptr;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
};

}  // namespace acc::rendezvous::detail
