#pragma once

// An io_uring through liburing (linked from its archive: acc-launch loads no liburing.so): a
// submission queue to fill, a submit that may wait, a completion queue to read. The store
// server's SendRing is built on it, and store_bench's all-io_uring yardstick. Where io_uring is
// missing or forbidden (old kernels, kernel.io_uring_disabled, container seccomp profiles) ok() is
// false. Not thread-safe; the ring's descriptor is close-on-exec.

#include <liburing.h>

namespace acc::rendezvous::detail {

class Uring {
 public:
  // At least `entries` submissions (the kernel rounds up to a power of two); `params` carries
  // setup flags and sizes (IORING_SETUP_*), as io_uring_setup takes them.
  explicit Uring(unsigned entries, io_uring_params params = {});
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  bool ok() const { return ok_; }
  int fd() const { return ok_ ? ring_.ring_fd : -1; }
  // Submissions that fit in the queue, and those queued and not yet taken by enter().
  unsigned entries() const { return entries_; }
  unsigned queued() const { return queued_; }

  // A zeroed submission at the queue's tail, counted as queued. Only when ok() and
  // queued() < entries().
  io_uring_sqe& queue();

  // Submits what is queued and waits for `wait` completions (none: returns at once). Returns how
  // many submissions the kernel took (they leave queued()), or -1 with errno.
  long enter(unsigned wait);

  // The oldest completion not yet popped, or nullptr.
  const io_uring_cqe* next_completion() {
    io_uring_cqe* cqe = nullptr;
    return io_uring_peek_cqe(&ring_, &cqe) == 0 ? cqe : nullptr;
  }
  void pop_completion() { io_uring_cq_advance(&ring_, 1); }

  // Unmaps the rings and closes the descriptor; ok() turns false.
  void close();

 private:
  io_uring ring_{};
  bool ok_ = false;
  unsigned entries_ = 0;
  unsigned queued_ = 0;
};

}  // namespace acc::rendezvous::detail
